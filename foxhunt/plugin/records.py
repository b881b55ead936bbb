"""Typed records that plugins return from the component hooks.

A record is a frozen attrs class: what a component *is* (name, budget, the
slots it reads and writes, its audit text) travels with the callable that does
the work, so the core can validate it before a run starts.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = ["LossComponent", "CentredSupport", "AuxiliaryTask", "GradientCombiner", "Combination", "Encoder", "ENCODER_DIAGNOSTIC_ROWS", "Kernel",
           "KernelPoint", "ReplayAugmentation", "AugmentationInputs", "AugmentationFold"]


def _dotted_name(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not value or not all(part.isidentifier() for part in value.split(".")):
        raise ValueError(
            f"{type(instance).__name__}.{attribute.name} must be a non-empty dotted identifier "
            f"(letters, digits, '_' and '.'), got {value!r}"
        )


def _budget_fraction(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ValueError(f"loss component {instance.name!r}: budget must be in (0, 1], got {value!r}")


def _names(value: Any) -> tuple[str, ...]:
    return tuple(value)


def _among_reads(instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    stray = [name for name in value if name not in instance.reads]
    if stray:
        raise ValueError(
            f"{type(instance).__name__} {instance.name!r}: optional_reads {stray} are not in reads; "
            "an optional read is one of the names in reads that may be missing from the run"
        )


def _positive_count(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"CentredSupport.{attribute.name} must be an int >= 1, got {value!r}")


@attrs.frozen
class CentredSupport:
    """A loss component's request for a state-value head and C51 atoms centred on it, sample by sample.

    With it, the learner's network grows a small per-branch MLP on the trunk's output giving
    ``outputs`` values per branch (``LossInputs.online.state_values [B, Branch, outputs]``, trained by the
    component's own loss), and every forward of the update places sample ``i``'s atoms at
    ``centre(state_values)_i + max(half_width, floor) × linspace(-1, 1)`` instead of the shared support's
    ``support.center ± support.half_width``. ``centre`` is a pure torch function
    ``[B, Branch, outputs] -> [B, Branch]`` (it receives detached values: the atoms are a coordinate system,
    not something the distributional losses move); ``floor`` names an ISV slot of width ``Branch`` holding
    the minimum half-width, which the component must also list in its ``reads``. At most one enabled
    component may ask (the learner refuses two). Without any, the network has no such head and the
    update is exactly what it was.
    """

    outputs: int = attrs.field(validator=_positive_count)
    centre: Callable[[Any], Any] = attrs.field(validator=attrs.validators.is_callable())
    floor: str = attrs.field(validator=_dotted_name)


def _at_least_one(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"AuxiliaryTask.{attribute.name} must be an int >= 1, got {value!r}")


def _bars_ahead(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    # 0 is a task that reads no future return (a head trained on the learner's own targets, like the quantile head)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"AuxiliaryTask.{attribute.name} must be an int >= 0 (bars of future returns), got {value!r}")


@attrs.frozen
class AuxiliaryTask:
    """A loss component's request for a prediction head on the trunk and the market's next returns.

    With it, the learner's network grows a small MLP on the trunk's output (``head_hidden`` units, then one
    linear layer) whose ``outputs`` columns belong to this component: :meth:`LossInputs.auxiliary` gives them
    as ``[B, outputs]`` in the update's online forward. Every sampled transition also carries the market's
    log-returns over the ``horizon`` bars after the bar its observation shows, standardised by the fold's
    training window (``LossInputs.future_returns [B, H]`` with ``future_valid [B, H]``, H the largest horizon
    any component asks for; a return that would leave the training window is masked, never read). The head
    is built only when a component asks; without one the network and the replay are exactly what they were.

    ``horizon = 0`` asks for the head's columns alone: a task trained on what :class:`LossInputs` already carries
    (the learner's own targets: the quantile head, the horizon-decomposed values). When every task asks for 0,
    H is 0: no future-return table is built or gathered, the replay keeps no bar index, and the batch's
    ``future_returns``/``future_valid`` are ``None``.
    """

    outputs: int = attrs.field(validator=_at_least_one)
    horizon: int = attrs.field(validator=_bars_ahead)


def _floor_is_read(instance: Any, attribute: attrs.Attribute, value: CentredSupport | None) -> None:
    if value is not None and value.floor not in instance.reads:
        raise ValueError(
            f"loss component {instance.name!r}: centred_support.floor {value.floor!r} must be in reads "
            "(the learner reads that slot for the component, and reads are checked against the layout)"
        )


@attrs.frozen
class LossComponent:
    """One loss term of the learner, returned by ``foxhunt_loss_components``.

    ``loss(batch)`` receives the learner's :class:`foxhunt.learner.LossInputs`
    (online and target network outputs for one replay batch, the ISV, atom
    supports) and returns a scalar tensor. The learner differentiates each
    component in isolation, clips its gradient to ``budget * max_grad_norm`` and
    sums the clipped gradients, so budgets over the enabled components must sum
    to exactly 1 (invariant 9; config ``[learner.budgets]`` may override them).
    ``per_sample`` (optional) returns the per-sample TD error used for
    prioritized-replay priorities. ``reads`` names the ISV slots the loss reads;
    each must be declared by a loaded plugin, or the run is refused when the
    components are collected, unless ``optional_reads`` also names it (the loss
    has a fallback when the slot's plugin is not loaded). ``centred_support`` (optional, a
    :class:`CentredSupport`) asks the learner for a state-value head and per-sample atom supports centred on
    it: the switch the IQL value head uses, so that the C51 projection, the expected Q and the targets all
    move to per-sample atoms without the core knowing which plugin asked. ``auxiliary`` (optional, an
    :class:`AuxiliaryTask`) asks for columns of the auxiliary prediction head and the market's next returns:
    what the auxiliary tasks (next-bar return, the coming bars' regime) learn from.
    """

    name: str = attrs.field(validator=_dotted_name)
    budget: float = attrs.field(validator=_budget_fraction)
    loss: Callable[[Any], Any] = attrs.field(validator=attrs.validators.is_callable())
    description: str = attrs.field(validator=attrs.validators.min_len(1))
    reads: tuple[str, ...] = attrs.field(default=(), converter=_names)
    per_sample: Callable[[Any], Any] | None = None
    optional_reads: tuple[str, ...] = attrs.field(default=(), converter=_names, validator=_among_reads)
    centred_support: CentredSupport | None = attrs.field(default=None, validator=_floor_is_read)
    auxiliary: AuxiliaryTask | None = None


def _non_negative_count(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"gradient combiner {instance.name!r}: {attribute.name} must be an int >= 0, got {value!r}")


@attrs.frozen
class GradientCombiner:
    """A rule that turns the loss components' isolated gradients into one, returned by ``foxhunt_gradient_combiners``.

    ``combine(gradients, norms, losses, limits, parameters)`` is a pure torch function (no in-place writes,
    no host reads: it runs inside a compiled, graph-captured update) of

    - ``gradients [C, P]``: each component's gradient, every parameter's laid end to end;
    - ``norms [C]``: their Euclidean norms (computed once by the learner);
    - ``losses [C]``: the component losses (detached);
    - ``limits [C]``: each component's budget limit, ``budget × max_grad_norm`` (budgets sum to 1);
    - ``parameters [C, parameters_per_component]``: the combiner's learned values (detached).

    It returns a :class:`Combination`: what each component contributes (the learner sums the contributions
    and applies the one safety clip that keeps the total within ``max_grad_norm``, whatever the combiner
    did; a combiner that keeps each contribution within its limit never makes it fire), and the gradient
    of its own learned values.

    ``parameters_per_component`` learned values per component (uncertainty weighting's log-variance: 1)
    start at zero, are stepped by the learner's optimiser together with the network and are saved with
    the learner's state (``learner.combiner``); 0 means none. ``[learner] combiner`` selects one combiner.
    """

    name: str = attrs.field(validator=_dotted_name)
    combine: Callable[..., Any] = attrs.field(validator=attrs.validators.is_callable())
    description: str = attrs.field(validator=attrs.validators.min_len(1))
    parameters_per_component: int = attrs.field(default=0, validator=_non_negative_count)


@dataclasses.dataclass(frozen=True)
class Combination:
    """What a :class:`GradientCombiner` returns.

    ``contributions [C, P]``: each component's share of the gradient (the learner sums them);
    ``norms [C]``: each contribution's norm (the ``learner.component_grad_norm_clipped`` signal);
    ``parameter_grad [C, W]``: the gradient of the combiner's learned values, ``None`` when it has none.
    A dataclass rather than an attrs class: it is built inside the compiled update, where dynamo traces
    dataclasses natively.
    """

    contributions: Any
    norms: Any
    parameter_grad: Any = None


def _positive_window(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"encoder {instance.name!r}: window must be an int >= 1 (bars), got {value!r}")


@attrs.frozen
class Encoder:
    """What turns a window of the last ``window`` bars into the trunk's input, returned by ``foxhunt_encoders``.

    ``build(n_features, portfolio_width, settings)`` returns an ``nn.Module`` (built inside the learner's
    seeded construction, so its initial weights follow the run's seed) that maps the encoder input
    ``[B, window × n_features + portfolio_width]`` (the feature rows of bars ``t - window + 1 .. t``, oldest
    first, then the portfolio features of the observation at ``t``) to ``[B, out_features]``; the module has
    an ``out_features`` int attribute, the width of the trunk's first layer. ``settings`` is the encoder
    plugin's resolved settings (``None`` when it declares none).

    The window is gathered on the device from the fold's feature matrix by each environment's bar index
    (:func:`foxhunt.learner.encoders.window_input`); bars before the first bar of the data repeat that bar.
    The module's parameters are part of the network (the ``learner.network`` state entry, with the online
    network's category, and its target copy): an encoder keeps no hidden state between steps, it is
    recomputed from the window each time. ``[learner] encoder`` selects one (default ``mlp``: the core's
    one-bar identity, today's network).

    With ``[learner] isv_context`` the network appends C live ISV lanes after the portfolio features
    (:mod:`foxhunt.learner.context`): ``portfolio_width`` then counts them, and a ``build`` that takes a
    ``context_width`` keyword is also told C (the last C of its non-window columns), so it can treat them apart;
    one that does not take it reads them as more portfolio columns.

    ``diagnostics(module, inputs, feature_names)``, optional: what the encoder wants a user to see, as a
    mapping of names to numbers. At every epoch boundary the trainer calls it (no gradient) with the built
    module, the encoder inputs of the replay's newest transitions (up to :data:`ENCODER_DIAGNOSTIC_ROWS`,
    ``[N, window × n_features + portfolio_width]``) and the names of the ``n_features`` feature columns, and
    writes the result into that epoch's ``metrics.jsonl`` row under ``encoder`` (e.g. the ``vsn`` encoder's
    mean selection weight per feature). Outside the training step, so it may synchronise.

    ``slot_values(module, inputs, feature_groups)``, optional: what the encoder writes into ISV slots at every
    epoch boundary, before the monitors observe, as ``{slot name: values}`` (a tensor or sequence as wide as the
    slot). ``inputs`` are the same rows as the diagnostics'; ``feature_groups`` names each feature column's
    :class:`foxhunt.contract.FeatureGroup` in lower case (``"market"``, ``"order_flow"``, ...). ``writes`` names
    every slot it returns: each must be declared by the encoder's own plugin (the host refuses one it did not
    declare, as for a kernel), and the learner refuses a result whose names are not exactly ``writes`` or whose
    width is not the slot's. A monitor of the same plugin that reads the slots puts them in the ``health_diag``
    log, the Prometheus gauges and the report (the ``vsn`` encoder's per-group selection weights).
    """

    name: str = attrs.field(validator=_dotted_name)
    window: int = attrs.field(validator=_positive_window)
    build: Callable[..., Any] = attrs.field(validator=attrs.validators.is_callable())
    description: str = attrs.field(validator=attrs.validators.min_len(1))
    settings: Any = None
    diagnostics: Callable[[Any, Any, tuple[str, ...]], Mapping[str, float]] | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.is_callable()))
    slot_values: Callable[[Any, Any, tuple[str, ...]], Mapping[str, Any]] | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.is_callable()))
    writes: tuple[str, ...] = attrs.field(default=(), converter=_names)

    @writes.validator
    def _writes_with_slot_values(self, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
        if bool(value) != (self.slot_values is not None):
            raise ValueError(f"encoder {self.name!r}: slot_values and writes come together (slot_values "
                             f"{'given' if self.slot_values is not None else 'missing'}, writes {list(value)})")


# How many of the replay's newest transitions an encoder's diagnostics read at an epoch boundary.
ENCODER_DIAGNOSTIC_ROWS = 4096


class KernelPoint(enum.StrEnum):
    """When the trainer runs a kernel."""

    CONSTRUCT = "construct"  # once, after freeze: static values written into their slots
    FOLD = "fold"  # at every fold start, after the state-reset dispatch
    EPOCH = "epoch"  # at every epoch boundary
    STEP = "step"  # after every learner update
    ENV_STEP = "env_step"  # the environment's physics: advances every episode by one bar


@attrs.frozen
class Kernel:
    """A device computation returned by ``foxhunt_kernels``.

    ``run(context)`` launches the kernel on the CPU or the GPU (``context`` is a
    :class:`foxhunt.kernels.KernelContext`). A kernel may write only the ISV
    slots it names in ``writes`` and that its own plugin declared: the host
    refuses a ``writes`` entry its plugin did not declare, and the trainer runs
    every kernel once on a scratch copy of the ISV before training and refuses
    one that changed any other slot (:mod:`foxhunt.plugin.foreign_writes`).
    ``reads`` names the ISV slots and signals it reads; each must be declared
    by a loaded plugin or be a signal of :mod:`foxhunt.contract`, unless
    ``optional_reads`` also names it (the kernel uses a default when the slot
    is absent).

    ``replaces`` (``ENV_STEP`` kernels only) names the environment kernel this
    one takes the place of when both are loaded: a run steps with exactly one
    environment kernel, and a physics variant (the trade_plans plugin's step)
    replaces the one it extends rather than asking the user to disable it
    (:func:`foxhunt.env.run_kernel.env_step_kernel`).
    """

    name: str = attrs.field(validator=_dotted_name)
    point: KernelPoint = attrs.field(converter=KernelPoint)
    run: Callable[[Any], Any] = attrs.field(validator=attrs.validators.is_callable())
    description: str = attrs.field(validator=attrs.validators.min_len(1))
    writes: tuple[str, ...] = attrs.field(default=(), converter=_names)
    reads: tuple[str, ...] = attrs.field(default=(), converter=_names)
    optional_reads: tuple[str, ...] = attrs.field(default=(), converter=_names, validator=_among_reads)
    replaces: str = attrs.field(default="", kw_only=True)

    @replaces.validator
    def _replaces_an_environment_kernel(self, attribute: attrs.Attribute, value: str) -> None:
        if not value:
            return
        _dotted_name(self, attribute, value)
        if self.point is not KernelPoint.ENV_STEP:
            raise ValueError(f"kernel {self.name!r}: only an ENV_STEP kernel replaces another, this one is {self.point.value}")


def _batch_share(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value <= 1.0:
        raise ValueError(f"replay augmentation {instance.name!r}: fraction must be in (0, 1], got {value!r}")


@attrs.frozen
class ReplayAugmentation:
    """A change to every sampled replay batch, returned by ``foxhunt_replay_augmentations``.

    ``augment(inputs)`` is a pure torch function of an :class:`AugmentationInputs` that returns the batch
    (a :class:`foxhunt.learner.Batch`) with the positions ``inputs.selected`` marks replaced by their
    augmented copies. It runs inside the sampling of every learner update, which may be compiled and
    captured in a CUDA graph: no host reads, no data-dependent Python branch, no change of shape.

    ``fraction`` (in (0, 1]) is the share of each batch it replaces; the replay picks the positions, evenly
    spread: position ``i`` of a batch of ``B`` is selected when ``i × fraction`` crosses an integer (every
    odd position at 0.5).

    ``prepare(fold)`` (optional) computes the augmentation's per-fold constants from an
    :class:`AugmentationFold` (the fold's features and normaliser, the environment's parameters): a mapping
    of names to arrays, kept on the replay's device with the same shapes in every fold, and handed to
    ``augment`` as ``inputs.tensors``. A replay whose fold was never set (filled outside the trainer)
    applies no augmentation.
    """

    name: str = attrs.field(validator=_dotted_name)
    augment: Callable[[Any], Any] = attrs.field(validator=attrs.validators.is_callable())
    fraction: float = attrs.field(validator=_batch_share)
    description: str = attrs.field(validator=attrs.validators.min_len(1))
    prepare: Callable[[Any], Any] | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.is_callable()))


@dataclasses.dataclass(frozen=True)
class AugmentationInputs:
    """What a :class:`ReplayAugmentation`'s ``augment`` receives for one sampled batch of ``B`` transitions.

    ``batch``: the sampled :class:`foxhunt.learner.Batch` (earlier augmentations already applied);
    ``selected [B, 1]`` bool: the positions this augmentation replaces; ``rewards [B]``: each sampled
    transition's own one-step reward (the first term of its n-step return); ``tensors``: the per-fold
    constants its ``prepare`` returned, as device tensors. A dataclass: it is built inside the compiled
    sampling, where dynamo traces dataclasses natively.
    """

    batch: Any
    selected: Any
    rewards: Any
    tensors: dict[str, Any]


@attrs.frozen(eq=False)
class AugmentationFold:
    """The fold a replay augmentation prepares for (``ReplayAugmentation.prepare``).

    ``feature_names``: the observation's market feature columns, in order (the portfolio columns,
    ``foxhunt.env.tables.PortfolioObs``, follow them); ``normalizer``: the fold's
    :class:`foxhunt.features.Normalizer`, fitted on its training window; ``env_params``: the environment's
    physics parameters ``[EP]`` (float64, ``foxhunt.env.tables.EP``); ``window``: the encoder's window W
    (``[learner] encoder``; 1 for the one-bar ``mlp``). With W > 1 a sampled observation is the encoder
    input ``[W × F + P]`` (``foxhunt.learner.encoders.window_input``): the ``F = len(feature_names)``
    feature columns of the W - 1 earlier bars, oldest first, then the one-bar observation (its ``F``
    features, then the ``P`` portfolio columns, which still close it). A per-column constant covers all
    ``W × F + P`` columns. ``feature_parity``: -1.0 for each odd feature column, +1.0 for each even one
    (from the run's feature table, so a feature plugin's declared parity counts); empty: look each name up
    in the core's families. ``execution_branches``: when the run splits each return by branch (``[learner]
    reward_split``, ``foxhunt.learner.execution_credit``), the branches whose return is the reward's execution
    part (the others' is the rest); empty when it does not. An augmentation that changes a return changes each
    branch's part.
    """

    feature_names: tuple[str, ...]
    normalizer: Any
    env_params: Any
    window: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    feature_parity: tuple[float, ...] = attrs.field(default=(), converter=tuple)
    execution_branches: tuple[int, ...] = attrs.field(default=(), converter=tuple)
