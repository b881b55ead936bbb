"""Per-branch exploration rate ε: a linear decay over the fold's transitions plus a boost as health falls.

``ε_sched_b = end_b + (start_b − end_b) × max(0, 1 − p / decay_fraction)`` over
the share ``p`` of the fold's environment transitions collected so far, and
``ε_b = min(ceiling, ε_sched_b + health_boost × (1 − health))``.

``p = (step − fold_start) × n_envs / fold_env_steps``: ``step`` is the
trainer's vector-step counter (the kernel context's ``step``), ``fold_start``
its value when the fold began (slot ``epsilon.fold_start``, written by the
fold kernel), ``fold_env_steps = train.epochs × train.env_steps_per_epoch``
(:func:`~foxhunt.fold_length.fold_length_of`). Why transitions and not the
epoch index (``train.progress``, which this kernel read before): with the
epoch index, ε stayed at ``start`` for the whole first epoch and dropped in
steps at epoch boundaries, so a run with few long epochs (the GPU profile: 3
epochs of ~1M transitions) spent a third of its data at ε = 1 and then
switched to near-greedy at once; docs/learner.md ("Why bigger runs learned
worse") has the measurements. Counted in transitions, the same config gives
the same ε at the same amount of data whatever ``env.n_envs`` and the epoch
count. The counter is float32 in the ISV: exact up to 2^24 vector steps.

Why the boost: an unhealthy learner tends to confirm its own estimates on
the data its greedy policy generates; more exploration brings in transitions
that contradict them. The environment's policy reads ``epsilon.branch`` (one
rate per action branch) when it samples actions. One device row per branch,
after every learner update; ``health.value`` defaults to 1 when the health
plugin is not loaded.
"""

from __future__ import annotations

from typing import Any

import attrs

from foxhunt import (
    MONITOR_STATE_PREFIX,
    AdaptiveMonitor,
    Branch,
    DimTable,
    Kernel,
    KernelPoint,
    Registrar,
    ResetCategory,
    auto,
    contract,
    hookimpl,
    reset_monitor,
)
from foxhunt.fold_length import FoldLength, fold_length_of
from foxhunt.kernels import DualKernel, device_constants, device_function
from foxhunt_plugins.adaptive.common import N_BRANCHES, BoundRun, clamp, param_tensor, read_or, slot_offsets, step_of
from foxhunt_plugins.adaptive.validators import branch_unit, per_branch, rate, unit

__all__ = ["EpsilonSettings", "VALUE", "FOLD_START", "EPSILON_INIT", "FOLD_START_KERNEL", "EpsilonSlot", "EpsilonParam", "EpsilonMonitor", "EPSILON_KERNEL",
           "epsilon_params", "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

VALUE = contract.EPSILON
FOLD_START = contract.EPSILON_FOLD_START
HEALTH = contract.HEALTH
EPSILON_INIT = 1.0  # before a fold's first update the Q-network has learnt nothing of this fold: explore fully


class EpsilonSlot(DimTable):
    """Positions in the ε kernel's slot-offset vector."""

    VALUE = auto()
    FOLD_START = auto()
    HEALTH = auto()


class EpsilonParam(DimTable):
    """Columns of the ε kernel's parameter table ``[Branch, EpsilonParam]``."""

    START = auto()
    END = auto()
    DECAY_FRACTION = auto()
    HEALTH_BOOST = auto()
    CEILING = auto()
    N_ENVS = auto()
    FOLD_ENV_STEPS = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
EPSILON_PARAM = device_constants(EpsilonParam)
EPSILON_SLOT = device_constants(EpsilonSlot)


@device_function
def _epsilon_row(b, args):
    isv, off, prm, step = args
    done = (step[0] - isv[off[EPSILON_SLOT.FOLD_START]]) * prm[b, EPSILON_PARAM.N_ENVS]
    progress = clamp(done / prm[b, EPSILON_PARAM.FOLD_ENV_STEPS], 0.0, 1.0)
    health = clamp(read_or(isv, off[EPSILON_SLOT.HEALTH], 1.0), 0.0, 1.0)
    end = prm[b, EPSILON_PARAM.END]
    remaining = max(0.0, 1.0 - progress / prm[b, EPSILON_PARAM.DECAY_FRACTION])
    scheduled = end + (prm[b, EPSILON_PARAM.START] - end) * remaining
    boosted = scheduled + prm[b, EPSILON_PARAM.HEALTH_BOOST] * (1.0 - health)
    isv[off[EPSILON_SLOT.VALUE] + b] = clamp(boosted, 0.0, prm[b, EPSILON_PARAM.CEILING])


EPSILON_KERNEL = DualKernel(_epsilon_row, "epsilon.update")


@device_function
def _fold_start_row(i, args):
    isv, off, step = args
    isv[off[EPSILON_SLOT.FOLD_START]] = step[0]


FOLD_START_KERNEL = DualKernel(_fold_start_row, "epsilon.fold_start")


@attrs.frozen
class EpsilonSettings:
    """``[plugins.epsilon]``: per-branch exploration, linear decay over ``decay_fraction`` of the fold plus a health boost.

    The fold is measured in environment transitions (``train.epochs ×
    train.env_steps_per_epoch``), so the same config explores the same share
    of its data whatever ``env.n_envs`` and however the fold is cut into epochs.
    """

    start: tuple[float, ...] = attrs.field(default=(1.0, 1.0, 1.0, 1.0), converter=per_branch, validator=branch_unit)
    end: tuple[float, ...] = attrs.field(default=(0.02, 0.02, 0.05, 0.05), converter=per_branch, validator=branch_unit)
    decay_fraction: float = attrs.field(default=0.5, validator=rate)
    health_boost: float = attrs.field(default=0.2, validator=unit)  # added at health 0
    ceiling: float = attrs.field(default=1.0, validator=unit)

    def __attrs_post_init__(self) -> None:
        if any(e > s for s, e in zip(self.start, self.end, strict=True)):
            raise ValueError(f"end {self.end} must not exceed start {self.start} per branch")


def epsilon_params(settings: EpsilonSettings, fold: FoldLength) -> list[list[float]]:
    """Parameter table ``[Branch, EpsilonParam]``."""
    table = [[0.0] * EpsilonParam.size() for _ in Branch]
    for branch in Branch:
        row = table[branch]
        row[EpsilonParam.START] = settings.start[branch]
        row[EpsilonParam.END] = settings.end[branch]
        row[EpsilonParam.DECAY_FRACTION] = settings.decay_fraction
        row[EpsilonParam.HEALTH_BOOST] = settings.health_boost
        row[EpsilonParam.CEILING] = settings.ceiling
        row[EpsilonParam.N_ENVS] = fold.n_envs
        row[EpsilonParam.FOLD_ENV_STEPS] = fold.env_steps
    return table


class EpsilonMonitor(AdaptiveMonitor):
    """Observes the per-branch exploration rates."""

    name = "epsilon"
    reads = (VALUE,)
    labels = {VALUE: Branch.names()}


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(EpsilonSettings)
    registrar.slot(VALUE, width=len(Branch), init=EPSILON_INIT,
                   doc="exploration rate per action branch [Branch], read by the policy when it samples actions")
    registrar.state(VALUE, ResetCategory.FOLD_RESET, doc="recomputed from the fold's transitions and health at every update")
    registrar.slot(FOLD_START, doc="the trainer's vector-step counter when the fold began (ε counts the fold's transitions from it)")
    registrar.state(FOLD_START, ResetCategory.FOLD_RESET, doc="written by the fold kernel at every fold boundary")
    registrar.state(MONITOR_STATE_PREFIX + EpsilonMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the ε monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any, settings: EpsilonSettings) -> list[Kernel]:
    params = epsilon_params(settings, fold_length_of(config))

    def offsets(context):
        return slot_offsets(context, (VALUE, FOLD_START, HEALTH), optional=(HEALTH,))

    def bind(context):
        return [(EPSILON_KERNEL, N_BRANCHES, (context.isv, offsets(context), param_tensor(params, context), step_of(context)))]

    def bind_fold(context):
        return [(FOLD_START_KERNEL, 1, (context.isv, offsets(context), step_of(context)))]

    return [
        Kernel(
            name="epsilon.fold_start",
            point=KernelPoint.FOLD,
            run=BoundRun(bind_fold),
            description="records the vector-step counter at the fold's start (ε counts the fold's transitions)",
            writes=(FOLD_START,),
        ),
        Kernel(
            name="epsilon.update",
            point=KernelPoint.STEP,
            run=BoundRun(bind),
            description="per-branch exploration: linear decay over the fold's transitions plus a boost as health falls",
            writes=(VALUE,),
            reads=(FOLD_START, HEALTH),
            optional_reads=(HEALTH,),  # 1.0 (no boost) when the health plugin is not loaded
        ),
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [EpsilonMonitor()]
