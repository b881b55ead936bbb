"""Every adaptive kernel against its float64 reference, on the CPU and on the simulator (or a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from adaptive_harness import BACKENDS, MECHANISMS, build_run, changed_slots, isv_array, random_signals, randomize_isv
from adaptive_reference import REFERENCES, STEP

from foxhunt.actions import Branch
from foxhunt.config import FoxhuntConfig
from foxhunt.learner import LearnerConfig
from foxhunt.plugin.host import PluginSelection
from foxhunt.plugin.records import KernelPoint

# [plugins.<name>] tables as a user writes them
CONFIGS = {
    "defaults": {},
    "tuned": {
        "health": {"w_gap": 0.0, "w_drift": 2.0, "w_grad": 1.0, "w_loss": 0.5, "w_collapse": 1.5, "gap_scale": 0.2,
                   "collapse_share": 0.8, "collapse_tol": 0.1, "fast_rate": 0.3, "slow_rate": 0.05},
        "tau": {"start": 0.05, "end": 0.002, "floor_min": 0.0, "floor_max": 0.03},
        "support": {"std_multiple": 2.0, "min_half_width": 0.5, "max_half_width": 8.0, "center_bound": 2.0,
                    "max_rate": 0.5},
        "grad_balance": {"targets": [2.0, 1.0, 0.5, 0.5], "limit": 2.0},
    },
    # steps of up to 0.6 half-widths against knots 0.4 apart: knots meet their neighbour and the +1 bound
    "learned": {"support": {"knot_learning_rate": 20.0, "knot_max_step": 0.6}},
}
# the run's [learner] atom_spacing: the tuned run places its atoms by the quantile knots, the learned run descends
# the projection error's gradient, so the support kernel moves the knots in those two
SPACINGS = {"defaults": "uniform", "tuned": "quantile", "learned": "learned"}


def _params(run, name: str, config) -> list:
    reference, params = REFERENCES[name]
    return params(run.host.settings(run.host.kernel_owners[name]), config)


def _signals_np(signals: dict[str, torch.Tensor], step: torch.Tensor) -> dict[str, np.ndarray]:
    host = {name: tensor.detach().cpu().numpy() for name, tensor in signals.items()}
    host[STEP] = step.cpu().numpy()
    return host


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
@pytest.mark.parametrize(("backend", "device"), BACKENDS, ids=[b.value for b, _ in BACKENDS])
def test_every_kernel_matches_its_float64_reference(backend, device, config_name):
    learner = LearnerConfig(atom_spacing=SPACINGS[config_name])
    config = FoxhuntConfig(plugins=PluginSelection(settings=CONFIGS[config_name]), learner=learner)
    run = build_run(config=config, device=device)
    if config_name == "tuned":
        assert run.host.settings("tau").start == 0.05  # the tables reached the plugins
    assert set(run.kernels) == set(REFERENCES)
    rng = np.random.default_rng(1234)
    for trial in range(4):
        randomize_isv(run, rng)
        signals = random_signals(rng, device)
        context = run.context(backend, device, signals)
        host_signals = _signals_np(signals, run.step)
        for name, kernel in run.kernels.items():
            reference, _ = REFERENCES[name]
            before = isv_array(run)
            expected = reference(before, run.layout, _params(run, name, config), host_signals)
            kernel.run(context)
            after = isv_array(run)
            assert changed_slots(run.layout, before, after) <= set(kernel.writes), name
            for slot in kernel.writes:
                span = run.layout.span(slot)
                np.testing.assert_allclose(after[span], expected[span], rtol=3e-5, atol=1e-6, err_msg=f"{name}: {slot}")


@pytest.mark.parametrize(("backend", "device"), BACKENDS, ids=[b.value for b, _ in BACKENDS])
def test_kernels_without_the_health_plugin_read_health_as_one(backend, device):
    names = [name for name in MECHANISMS if name != "health"]
    run = build_run(names, device=device, diagnostics=False)
    assert "health.value" not in run.layout.offsets
    rng = np.random.default_rng(7)
    randomize_isv(run, rng)
    signals = random_signals(rng, device)
    context = run.context(backend, device, signals)
    for name, kernel in run.kernels.items():
        reference, _ = REFERENCES[name]
        before = isv_array(run)
        expected = reference(before, run.layout, _params(run, name, None), _signals_np(signals, run.step))
        kernel.run(context)
        after = isv_array(run)
        for slot in kernel.writes:
            span = run.layout.span(slot)
            np.testing.assert_allclose(after[span], expected[span], rtol=3e-5, atol=1e-6, err_msg=f"{name}: {slot}")


def test_kernel_points_and_ownership():
    run = build_run()
    points = {name: kernel.point for name, kernel in run.kernels.items()}
    assert points.pop("static.write") is KernelPoint.CONSTRUCT
    assert points.pop("epsilon.fold_start") is KernelPoint.FOLD
    assert set(points.values()) == {KernelPoint.STEP}
    for kernel in run.kernels.values():
        for slot in kernel.writes:
            assert run.layout.slot(slot).owner == kernel.name.split(".")[0]


def test_learner_slot_widths_match_what_the_learner_reads():
    from foxhunt.learner.slots import SLOT_WIDTHS

    from foxhunt import contract

    run = build_run()
    # the slots the adaptive plugins own; the others' widths (sarsa.temperature, of expected_sarsa) are checked
    # with every built-in in tests/test_contract.py
    adaptive = {name: width for name, width in SLOT_WIDTHS.items() if contract.by_name(name).owner in MECHANISMS}
    for name, width in adaptive.items():
        assert run.layout.width(name) == width, name
    assert run.layout.width("epsilon.branch") == len(Branch)


def test_a_signal_of_the_wrong_shape_is_refused_with_its_expected_shape():
    run = build_run(["health"], diagnostics=False)
    rng = np.random.default_rng(0)
    signals = random_signals(rng)
    signals["learner.q_gap"] = torch.zeros(3)
    context = run.context(BACKENDS[0][0], "cpu", signals)
    with pytest.raises(ValueError, match=r"learner\.q_gap.*\[4\]"):
        run.kernels["health.update"].run(context)


def test_a_missing_signal_is_named():
    run = build_run(["grad_balance"], diagnostics=False)
    context = run.context(BACKENDS[0][0], "cpu", {})
    with pytest.raises(KeyError, match="learner.branch_grad_norm"):
        run.kernels["grad_balance.update"].run(context)
