"""The monitor protocol: read-only views, fire-rate statistics, snapshots, reset dispatch."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from foxhunt.plugin import core_declarations
from foxhunt.errors import MonitorWriteError
from foxhunt.isv import ISV, IsvLayout, Slot
from foxhunt.kernels import Backend, KernelContext
from foxhunt.monitoring.monitors import AdaptiveMonitor, SignalSnapshot, attach_monitors
from foxhunt.plugin.host import PluginHost
from foxhunt.plugin.records import KernelPoint
from foxhunt.state import ResetCategory, StateEntry, StateRegistry

MECHANISMS = ("health", "tau", "gamma", "epsilon", "support", "grad_balance", "static")


def _one_slot_isv(width: int = 1) -> ISV:
    return ISV(IsvLayout.compose([Slot("probe.value", width, "probe")]))


def _signals(rng: np.random.Generator) -> dict[str, torch.Tensor]:
    return {
        "learner.q_gap": torch.tensor(rng.exponential(0.1, 4), dtype=torch.float32),
        "learner.greedy_share": torch.tensor(rng.uniform(0.3, 1.0, 4), dtype=torch.float32),
        "learner.q_mean": torch.tensor(rng.normal(0, 2, 4), dtype=torch.float32),
        "learner.q_std": torch.tensor(rng.exponential(1.0, 4), dtype=torch.float32),
        # [Branch, AtomKnot], sorted along the knots as batch quantiles are
        "learner.return_quantiles": torch.tensor(np.sort(rng.normal(0, 2, (4, 5)), axis=1), dtype=torch.float32),
        "learner.knot_gradient": torch.tensor(rng.normal(0, 0.05, (4, 5)), dtype=torch.float32),
        "learner.grad_norm": torch.tensor([rng.exponential()], dtype=torch.float32),
        "learner.loss": torch.tensor([rng.normal(1.0, 0.2)], dtype=torch.float32),
        "learner.branch_grad_norm": torch.tensor(rng.exponential(1.0, 4) + 0.01, dtype=torch.float32),
        "learner.component_grad_norm": torch.tensor(rng.exponential(1.0, 2), dtype=torch.float32),
        "learner.component_grad_norm_clipped": torch.tensor(rng.exponential(1.0, 2), dtype=torch.float32),
        "learner.safety_clips": torch.tensor(0, dtype=torch.int64),
    }


def test_writing_to_the_snapshot_raises():
    isv = _one_slot_isv(2)
    view = isv.snapshot()
    with pytest.raises(MonitorWriteError):
        view["probe.value"] = 1.0
    with pytest.raises(MonitorWriteError):
        view._values = np.zeros(3)
    with pytest.raises(ValueError, match="read-only"):
        view["probe.value"][0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        view.as_array()[0] = 1.0
    assert isv.view("probe.value").tolist() == [0.0, 0.0]


def test_monitor_reads_are_copies():
    isv = _one_slot_isv()
    monitor = AdaptiveMonitor("probe", ("probe.value",))
    values = monitor.read(isv.snapshot())
    values["probe.value"][0] = 5.0
    assert isv.view("probe.value").item() == 0.0


def test_signal_snapshot_is_read_only_and_copied():
    source = torch.tensor([1.0, 2.0])
    snapshot = SignalSnapshot.capture({"learner.q_mean": source}, {"learner.q_mean": ("a", "b")})
    source.fill_(9.0)
    assert snapshot["learner.q_mean"].tolist() == [1.0, 2.0]
    with pytest.raises(MonitorWriteError):
        snapshot["learner.q_mean"] = np.zeros(2)
    with pytest.raises(ValueError, match="read-only"):
        snapshot["learner.q_mean"][0] = 3.0
    with pytest.raises(KeyError, match="learner.q_mean"):
        snapshot["learner.q_gap"]
    assert snapshot.labels("learner.q_mean") == ("a", "b")


@pytest.mark.parametrize(
    ("sequence", "fires"),
    [
        ([1.0], 0),
        ([1.0, 1.0, 1.0], 0),
        ([1.0, 1.0, 2.0, 2.0, 2.0, 3.0], 2),
        ([0.0, 1.0, 0.0, 1.0, 0.0], 4),
        ([5.0, 5.0, 5.0, 5.0, 6.0], 1),
    ],
)
def test_fire_rate_counts_changes_between_observations(sequence, fires):
    isv = _one_slot_isv()
    monitor = AdaptiveMonitor("probe", ("probe.value",))
    for value in sequence:
        isv.write("probe.value", value)
        monitor.observe(isv.snapshot())
    assert monitor.observations == len(sequence)
    assert monitor.fires == fires
    expected = fires / (len(sequence) - 1) if len(sequence) > 1 else 0.0
    assert monitor.fire_rate == pytest.approx(expected)
    assert monitor.diagnose(isv.snapshot()).fire_rate == pytest.approx(expected)


def test_a_change_in_any_element_of_a_wide_slot_fires():
    isv = _one_slot_isv(3)
    monitor = AdaptiveMonitor("probe", ("probe.value",))
    for values in ([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [2.0, 0.0, 1.0]):
        isv.write("probe.value", torch.tensor(values))
        monitor.observe(isv.snapshot())
    assert (monitor.fires, monitor.observations) == (2, 4)


def test_gradient_monitor_fire_rate_counts_safety_clip_firings():
    from foxhunt_plugins.diagnostics import SAFETY_CLIPS, GradientMonitor

    isv = _one_slot_isv()
    monitor = GradientMonitor()
    for count in (0, 0, 1, 1, 3):
        snapshot = SignalSnapshot({SAFETY_CLIPS: np.array(count)})
        monitor.observe(isv.snapshot(), snapshot)
    assert (monitor.fires, monitor.observations) == (2, 5)
    assert monitor.fire_rate == pytest.approx(0.5)


def test_diagnose_names_elements_by_labels():
    from foxhunt_plugins.diagnostics import COMPONENT_GRAD_NORM, GradientMonitor, QStatsMonitor

    isv = _one_slot_isv()
    snapshot = SignalSnapshot(
        {COMPONENT_GRAD_NORM: np.array([1.0, 2.0]), "learner.q_mean": np.arange(4.0)},
        {COMPONENT_GRAD_NORM: ("c51", "cql")},
    )
    grads = GradientMonitor().diagnose(isv.snapshot(), snapshot)
    assert grads.values == {f"{COMPONENT_GRAD_NORM}[c51]": 1.0, f"{COMPONENT_GRAD_NORM}[cql]": 2.0}
    q = QStatsMonitor().diagnose(isv.snapshot(), snapshot)
    assert q.values["learner.q_mean[URGENCY]"] == 3.0
    assert q.health is None


def test_a_monitor_needs_a_name_and_something_to_read():
    with pytest.raises(ValueError, match="name"):
        AdaptiveMonitor("probe", ())
    assert AdaptiveMonitor("probe", signals=("learner.q_mean",)).signals == ("learner.q_mean",)


def test_monitor_statistics_reset_through_the_registry():
    monitor = AdaptiveMonitor("probe", ("probe.value",))
    isv = _one_slot_isv()
    registry = StateRegistry(
        [StateEntry(monitor.state_name, "probe", ResetCategory.FOLD_RESET, reset=lambda m: m.reset_statistics())]
    )
    assert attach_monitors(registry, [monitor, AdaptiveMonitor("other", ("probe.value",))]) == ["monitor.probe"]
    monitor.observe(isv.snapshot())
    monitor.observe(isv.snapshot())
    registry.fold_boundary()
    assert (monitor.observations, monitor.fires) == (0, 0)


def test_the_isv_is_bit_identical_around_every_monitor_call_over_a_run():
    host = PluginHost()
    host.add_plugin(core_declarations, core_declarations.CORE_PLUGIN_NAME)
    for name in MECHANISMS:
        host.add_plugin(importlib.import_module(f"foxhunt_plugins.adaptive.{name}"), name)
    host.add_plugin(importlib.import_module("foxhunt_plugins.diagnostics"), "diagnostics")
    host.declare()
    registries = host.freeze()
    isv = ISV(registries.layout)
    kernels = host.kernels(None)
    monitors = host.monitors(None)
    assert {m.name for m in monitors} >= set(MECHANISMS) - {"static"} | {"gradients", "q_stats"}
    rng = np.random.default_rng(0)
    for kernel in (k for k in kernels if k.point is KernelPoint.CONSTRUCT):
        kernel.run(KernelContext("cpu", Backend.CPU, isv=isv.tensor, layout=registries.layout))
    counter = torch.zeros(1, dtype=torch.int64)  # the trainer's vector-step counter (ε counts the fold's transitions)
    for step in range(6):
        signals = _signals(rng)
        counter.add_(1)
        context = KernelContext("cpu", Backend.CPU, isv=isv.tensor, layout=registries.layout, signals=signals,
                                step=counter)
        for kernel in (k for k in kernels if k.point is KernelPoint.STEP):
            kernel.run(context)
        isv.write("train.progress", step / 6)
        snapshot = SignalSnapshot.capture(signals)
        for monitor in monitors:
            for call in (
                lambda: monitor.read(isv.snapshot(), snapshot),
                lambda: monitor.observe(isv.snapshot(), snapshot),
                lambda: monitor.diagnose(isv.snapshot(), snapshot),
            ):
                before = isv.tensor.clone()
                call()
                assert torch.equal(before.view(torch.int32), isv.tensor.view(torch.int32)), monitor.name
    fire_rates = {m.name: m.fire_rate for m in monitors}
    assert fire_rates["health"] == 1.0  # health moves at every update
    assert fire_rates["gradients"] == 0.0  # no safety clip fired
