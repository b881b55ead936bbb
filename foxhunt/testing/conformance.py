"""The plugin conformance machine: a hypothesis rule-based state machine run against one plugin.

A plugin's tests get a ``unittest.TestCase`` class from :func:`conformance_machine`
and pytest collects it::

    from foxhunt.testing import conformance_machine
    import my_plugin

    TestMyPluginConformance = conformance_machine(my_plugin, "my_plugin")

Rules, in the order the lifecycle allows them: declare, freeze, training steps
(the plugin's CONSTRUCT kernels at freeze; its STEP and EPOCH kernels and its loss
components on small random replay batches; its monitors observing), fold reset,
window reset, soft reset, checkpoint round trip. Hypothesis chooses the sequence and the
random inputs and shrinks any failure to the shortest sequence that shows it.

Invariants checked after every rule:

- ISV slots are disjoint, cover the buffer, and each is owned by a loaded plugin
  and has a state-reset entry; the fingerprint lanes hold the layout's hash bit-exact;
- a kernel changed only the ISV slots it declares in ``writes`` (the comparison
  every run also makes once, before training: :mod:`foxhunt.plugin.foreign_writes`);
- right after a fold reset every fold-reset and soft-reset ISV slot is back to its
  initial value, after a window reset every window-reset slot is, and after a
  soft reset every soft-reset slot is;
- a reset left training-persist and schema-contract slots untouched;
- a checkpoint round trip gives back the ISV bit-identical with the same fingerprint,
  and a second, independent declare/freeze of the same plugins gives the same layout;
- monitors left the ISV bit-identical (they are read-only);
- loss components return a finite scalar (and a finite ``[B]`` per-sample error).

State other than ISV slots (a plugin's own objects) is reset through its dispatch;
the kit needs the live objects for that: pass ``state_objects``. Environment
kernels (``ENV_STEP``) need the vectorised environment's buffers and are not run.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from foxhunt.actions import Branch, branch_sizes
from foxhunt.checkpoint import load_checkpoint, save_checkpoint
from foxhunt.config import FoxhuntConfig
from foxhunt.plugin.foreign_writes import changed_slots, slot_bits
from foxhunt.isv import FINGERPRINT_SLOT, ISV, IsvLayout
from foxhunt.kernels import Backend, KernelContext
from foxhunt.monitoring.monitors import SignalSnapshot, attach_monitors
from foxhunt.plugin.host import FrozenRegistries, Phase, PluginHost
from foxhunt.plugin.records import KernelPoint, LossComponent
from foxhunt.state import ResetCategory
from foxhunt.testing.hosts import make_host

__all__ = ["conformance_machine", "check_plugin", "ConformanceError", "DEFAULT_SETTINGS"]

# Each example builds a small learner and runs numba kernels: few, short examples keep a plugin's suite fast.
DEFAULT_SETTINGS = settings(
    max_examples=8, stateful_step_count=8, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
OBS_DIM = 4
N_ENVS = 2
REPLAY_FILL = 12
SMALL_LEARNER = {
    "hidden": (8,),
    "head_hidden": 8,
    "n_atoms": 5,
    "n_quantiles": 2,
    "n_target_quantiles": 2,
    "n_cos": 4,
    "ensemble_size": 2,
    "batch_size": 8,
}
PERSISTENT = (ResetCategory.TRAINING_PERSIST, ResetCategory.SCHEMA_CONTRACT)


class ConformanceError(AssertionError):
    """A plugin broke a foxhunt invariant; the message says which, and what to change."""


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    # Compare float32 buffers by their bits: NaN payloads and -0.0 count, as they do in a checkpoint.
    return tensor.detach().cpu().contiguous().view(torch.int32).clone()


def check_plugin(plugin: Any, name: str, *, extra_plugins: Sequence[tuple[Any, str]] = ()) -> FrozenRegistries:
    """Declare and freeze ``plugin`` (with the core and ``extra_plugins``) once; raises ``PluginError`` with every problem."""
    host = make_host(*extra_plugins, (plugin, name))
    host.declare()
    return host.freeze()


def _small_learner_config(config: Any, components: Sequence[LossComponent]) -> Any:
    import attrs

    from foxhunt.learner import LearnerConfig, ReplayConfig, learner_config_of

    loss_names = [c.name for c in components]
    base = learner_config_of(config)
    share = 1.0 / len(loss_names)
    # Only this plugin's components train here, so their budgets are split evenly to sum to 1 (invariant 9).
    budgets = {name: share for name in loss_names}
    budgets[loss_names[-1]] = 1.0 - share * (len(loss_names) - 1)
    # Priorities come from one of the components trained here; without a per-sample TD error, replay is uniform.
    with_td = [c.name for c in components if c.per_sample is not None]
    replay = ReplayConfig(capacity=64, anneal_steps=10, prioritized=bool(with_td))
    if not isinstance(base, LearnerConfig):
        base = LearnerConfig()
    priority = base.priority_component if base.priority_component in with_td or not with_td else with_td[0]
    return attrs.evolve(base, **SMALL_LEARNER, replay=replay, budgets=budgets, priority_component=priority)


def _reference_td_loss(inputs: Any) -> torch.Tensor:
    delta = inputs.taken(inputs.online.q) - inputs.target_q  # [B, Branch]
    return inputs.batch_mean(inputs.branch_mean(0.5 * delta * delta))


def _reference_component() -> LossComponent:
    return LossComponent(
        name="conformance.reference_td", budget=1.0, loss=_reference_td_loss,
        description="squared TD error the kit trains with when the plugin under test has no loss of its own",
    )


class _PluginConformance(RuleBasedStateMachine):
    """Subclassed by :func:`conformance_machine` with the plugin under test bound as class attributes."""

    plugin: Any = None
    plugin_name: str = ""
    config: Any = None
    extra_plugins: Sequence[tuple[Any, str]] = ()
    signals: Callable[[IsvLayout], Mapping[str, torch.Tensor]] | None = None
    state_objects: Mapping[str, Callable[[], Any]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.host: PluginHost = make_host(*self.extra_plugins, (self.plugin, self.plugin_name),
                                          selection=getattr(self.config, "plugins", None))
        self.registries: FrozenRegistries | None = None
        self.directory = Path(tempfile.mkdtemp(prefix="foxhunt-conformance-"))
        self.learner: Any = None
        self.pending: list[Callable[[], None]] = []  # checks recorded by a rule, verified by the invariants

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------
    @property
    def frozen(self) -> bool:
        return self.registries is not None

    def _fail(self, message: str) -> None:
        raise ConformanceError(f"plugin {self.plugin_name!r}: {message}")

    def _slot_values(self) -> dict[str, torch.Tensor]:
        return slot_bits(self.isv.tensor, self.registries.layout)

    def _run_kernels(self, point: KernelPoint) -> None:
        for kernel in self.kernels.get(point, ()):
            before = self._slot_values()
            try:
                kernel.run(self.context)
            except KeyError as error:
                self._fail(
                    f"kernel {kernel.name!r} ({point}) could not run: {error}. Pass signals=... to "
                    "conformance_machine with the tensors it reads"
                )
            after = self._slot_values()
            changed = changed_slots(before, after)  # the comparison a run makes once before training
            allowed = set(kernel.writes)
            self.pending.append(lambda kernel=kernel, changed=changed, allowed=allowed: self._check_writes(kernel, changed, allowed))

    def _check_writes(self, kernel: Any, changed: list[str], allowed: set[str]) -> None:
        stray = [name for name in changed if name not in allowed]
        if stray:
            self._fail(f"kernel {kernel.name!r} wrote ISV slot(s) {stray} not in its writes={sorted(allowed)}")

    def _observe_monitors(self) -> None:
        if not self.monitors:
            return
        before = _bits(self.isv.tensor)
        signal_tensors = dict(self.context.signals)
        signal_tensors.update(self.learner.metrics())
        snapshot = SignalSnapshot.capture(signal_tensors)
        for monitor in self.monitors:
            monitor.observe(self.isv.snapshot(), snapshot)
            monitor.diagnose(self.isv.snapshot(), snapshot)
        after = _bits(self.isv.tensor)
        self.pending.append(lambda: self._check_monitors(before, after))

    def _check_monitors(self, before: torch.Tensor, after: torch.Tensor) -> None:
        if not torch.equal(before, after):
            self._fail("the ISV changed while monitors observed it; monitors are read-only (invariant 8)")

    # -- rules -----------------------------------------------------------------------------
    @precondition(lambda self: self.host.phase is Phase.DISCOVERING)
    @rule()
    def declare(self) -> None:
        self.host.declare()

    @precondition(lambda self: self.host.phase is Phase.DECLARING)
    @rule()
    def freeze(self) -> None:
        self.registries = self.host.freeze()  # a PluginError here lists every problem, with its fix
        config = self.config if self.config is not None else FoxhuntConfig()
        layout = self.registries.layout
        self.isv = ISV(layout)
        self.registries.state.attach_isv(self.isv)
        self.losses = self.host.loss_components(config)
        self.monitors = self.host.monitors(config)
        self.kernels: dict[KernelPoint, list[Any]] = {}
        for kernel in self.host.kernels(config):
            self.kernels.setdefault(kernel.point, []).append(kernel)
        attach_monitors(self.registries.state, self.monitors)
        for entry_name, factory in self.state_objects.items():
            self.registries.state.attach(entry_name, factory())
        self._build_learner(config)
        for unattached in self.registries.state.unattached():
            entry = self.registries.state.entry(unattached)
            self._fail(
                f"state entry {unattached!r} ({entry.category}) has no live object to reset; pass "
                f"state_objects={{{unattached!r}: <factory>}} to conformance_machine"
            )
        signals = dict(self.signals(layout)) if self.signals is not None else {}
        self.context = KernelContext(
            device="cpu", backend=Backend.CPU, isv=self.isv.tensor, layout=layout, signals=signals,
            step=torch.zeros(1, dtype=torch.int64),
        )
        self.host.start()
        self._run_kernels(KernelPoint.CONSTRUCT)

    def _build_learner(self, config: Any) -> None:
        """A small learner: its state is core state every fold reset dispatches, and STEP kernels follow its updates."""
        from foxhunt.learner import Learner

        # A plugin without losses trains beside a plain squared-TD component, so updates still happen.
        components = self.losses or [_reference_component()]
        learner_config = _small_learner_config(config, components)
        self.learner = Learner(learner_config, self.registries.layout, self.isv, components, OBS_DIM, "cpu", 0,
                               n_envs=N_ENVS)
        self.learner.attach_state(self.registries.state)

    def _fill_replay(self, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        sizes = torch.tensor(branch_sizes())
        horizon = self.learner.future_horizon
        if horizon:  # an auxiliary task reads future returns: a random price path, its first bars the training window
            close = torch.exp(torch.cumsum(0.01 * torch.randn(REPLAY_FILL + horizon + 1, generator=generator,
                                                              dtype=torch.float64), 0))
            self.learner.use_future_returns(close.numpy(), 0, REPLAY_FILL + horizon // 2 + 1)
        for step in range(REPLAY_FILL):
            self.learner.replay.add(
                torch.randn(N_ENVS, OBS_DIM, generator=generator),
                (torch.rand(N_ENVS, len(Branch), generator=generator) * sizes).long(),
                torch.randn(N_ENVS, generator=generator),
                torch.randn(N_ENVS, OBS_DIM, generator=generator),
                (torch.rand(N_ENVS, generator=generator) < 0.2).float(),
                bars=torch.full((N_ENVS,), step, dtype=torch.int64) if horizon else None,
            )

    def _check_losses(self) -> None:
        inputs = self.learner.loss_inputs(self.learner.sample())
        for component in self.losses:
            loss = component.loss(inputs)
            if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                self._fail(f"loss component {component.name!r} must return a scalar tensor, got {loss!r}")
            if not math.isfinite(loss.item()):
                self._fail(f"loss component {component.name!r} returned {loss.item()} on a random batch")
            if component.per_sample is not None:
                error = component.per_sample(inputs)
                if tuple(error.shape) != (inputs.batch.obs.shape[0],) or not torch.isfinite(error).all():
                    self._fail(f"loss component {component.name!r}: per_sample must give a finite [B] tensor")

    @precondition(lambda self: self.frozen)
    @rule(steps=st.integers(1, 3), seed=st.integers(0, 2**16))
    def train(self, steps: int, seed: int) -> None:
        """Training steps on random transitions: learner updates, STEP kernels, then EPOCH kernels and monitors."""
        self._fill_replay(seed)
        self._check_losses()
        for _ in range(steps):
            self.learner.step()
            self._run_kernels(KernelPoint.STEP)
            self.context.step.add_(1)
        self._run_kernels(KernelPoint.EPOCH)
        self._observe_monitors()

    def _reset(self, categories: Sequence[ResetCategory], dispatch: Callable[[], Any]) -> None:
        layout = self.registries.layout
        before = self._slot_values()
        dispatch()
        after = self._slot_values()
        entries = {e.name: e for e in self.registries.state.entries() if e.is_isv_slot}
        reset = [n for n, e in entries.items() if e.category in categories]
        kept = [n for n, e in entries.items() if e.category in PERSISTENT]
        initial = {slot.name: _bits(torch.full((slot.width,), slot.init)) for slot in layout.slots}
        self.pending.append(lambda: self._check_reset(reset, kept, initial, before, after, categories))

    def _check_reset(self, reset, kept, initial, before, after, categories) -> None:
        wrong = [n for n in reset if not torch.equal(after[n], initial[n])]
        if wrong:
            self._fail(f"after the reset of {', '.join(map(str, categories))} slots, {wrong} are not back to their init")
        touched = [n for n in kept if not torch.equal(before[n], after[n])]
        if touched:
            self._fail(f"a reset changed training-persist/schema-contract slot(s) {touched}")

    @precondition(lambda self: self.frozen)
    @rule()
    def fold_reset(self) -> None:
        """The fold boundary: every fold-reset and soft-reset entry's dispatch, then the FOLD kernels."""
        self._reset((ResetCategory.FOLD_RESET, ResetCategory.SOFT_RESET), self.registries.state.fold_boundary)
        self._run_kernels(KernelPoint.FOLD)

    @precondition(lambda self: self.frozen)
    @rule()
    def window_reset(self) -> None:
        """The window boundary (the trainer's, before every epoch): every window-reset entry's dispatch."""
        self._reset((ResetCategory.WINDOW_RESET,), self.registries.state.window_boundary)

    @precondition(lambda self: self.frozen)
    @rule()
    def soft_reset(self) -> None:
        """Only the soft-reset entries: each back to its bootstrap value."""
        state = self.registries.state
        soft = [e.name for e in state.entries() if e.category is ResetCategory.SOFT_RESET]
        self._reset((ResetCategory.SOFT_RESET,), lambda: [state.reset(name) for name in soft])

    @precondition(lambda self: self.frozen)
    @rule()
    def checkpoint_round_trip(self) -> None:
        """Save the ISV, load it back into the live buffer, and compose the layout again from scratch."""
        layout = self.registries.layout
        saved = _bits(self.isv.tensor)
        path = save_checkpoint(self.directory / "checkpoint", {"isv": self.isv.tensor},
                               {"plugins": self.host.versions()}, layout)
        tensors, metadata = load_checkpoint(path, layout)
        self.isv.tensor.copy_(tensors["isv"])
        again = check_plugin(self.plugin, self.plugin_name, extra_plugins=self.extra_plugins).layout
        self.pending.append(lambda: self._check_round_trip(saved, metadata, again))

    def _check_round_trip(self, saved: torch.Tensor, metadata: Mapping[str, Any], again: IsvLayout) -> None:
        layout = self.registries.layout
        if not torch.equal(saved, _bits(self.isv.tensor)):
            self._fail("the ISV is not bit-identical after a checkpoint save and load")
        if metadata["isv"]["fingerprint"] != layout.fingerprint_hex or self.isv.stored_fingerprint() != layout.fingerprint:
            self._fail("the layout fingerprint changed across a checkpoint save and load")
        if again.fingerprint != layout.fingerprint:
            self._fail(
                f"declaring the plugin again gave another layout ({again.fingerprint_hex} != {layout.fingerprint_hex}): "
                "its slot declarations must not depend on anything but the code"
            )

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def recorded_checks_hold(self) -> None:
        """Kernel writes, resets, monitors, checkpoints: what the last rule recorded."""
        pending, self.pending = self.pending, []
        for verify in pending:
            verify()

    @invariant()
    def slots_disjoint_and_owned(self) -> None:
        if not self.frozen:
            return
        layout = self.registries.layout
        cursor = 0
        entries = {e.name for e in self.registries.state.entries()}
        for slot in layout.slots:
            if layout.offsets[slot.name] != cursor:
                self._fail(f"ISV slot {slot.name!r} starts at {layout.offsets[slot.name]}, expected {cursor}: slots overlap")
            cursor += slot.width
            if slot.owner not in self.host.plugins:
                self._fail(f"ISV slot {slot.name!r} is owned by {slot.owner!r}, which is not a loaded plugin")
            if slot.name not in entries:
                self._fail(f"ISV slot {slot.name!r} has no state-reset entry")
        if cursor != layout.size or layout.slots[-1].name != FINGERPRINT_SLOT:
            self._fail("the ISV layout does not end with the fingerprint slot or does not cover the buffer")
        if self.isv.stored_fingerprint() != layout.fingerprint:
            self._fail("the fingerprint lanes of the ISV no longer hold the layout's fingerprint (something wrote them)")


def conformance_machine(
    plugin: Any,
    name: str,
    config: Any = None,
    *,
    extra_plugins: Sequence[tuple[Any, str]] = (),
    signals: Callable[[IsvLayout], Mapping[str, torch.Tensor]] | None = None,
    state_objects: Mapping[str, Callable[[], Any]] | None = None,
    test_settings: settings | None = None,
) -> type:
    """A ``unittest.TestCase`` class that runs the conformance state machine against ``plugin``.

    :param plugin: the plugin module (or object) as its entry point loads it.
    :param name: its entry-point name.
    :param config: the run config handed to the component hooks (default: ``FoxhuntConfig()``);
        its ``[plugins.<name>]`` tables set the plugins' settings (an opt-in plugin gets one that enables it).
    :param extra_plugins: ``(plugin, name)`` pairs loaded beside it (plugins whose slots it reads).
    :param signals: ``signals(layout) -> {name: tensor}``, the signal tensors its kernels read.
    :param state_objects: ``{state entry name: factory}`` live objects for its non-ISV resetting state.
    :param test_settings: hypothesis settings (default :data:`DEFAULT_SETTINGS`).
    """
    machine = type(
        f"{name.title().replace('_', '').replace('.', '')}Conformance",
        (_PluginConformance,),
        {
            "plugin": plugin,
            "plugin_name": name,
            "config": config,
            "extra_plugins": tuple(extra_plugins),
            "signals": staticmethod(signals) if signals is not None else None,
            "state_objects": dict(state_objects or {}),
        },
    )
    case = machine.TestCase
    case.settings = test_settings or DEFAULT_SETTINGS
    return case
