"""The Polyak target-update rate τ: a cosine schedule over the fold with a health-coupled floor.

``τ_sched = end + (start − end) × (1 + cos(π p)) / 2`` over training progress
``p`` (the ``train.progress`` slot the trainer writes at epoch boundaries);
``floor = floor_min + (floor_max − floor_min) × (1 − health)``;
``τ = max(τ_sched, floor)``.

Why the floor rises as health falls: late in a fold the schedule makes τ tiny,
so the target network is nearly frozen. If learning then turns unhealthy, a
frozen target keeps feeding the online network the stale estimate it is
drifting away from; a higher floor lets the target follow and the two re-sync.
Computed on the device after every learner update (health changes every
update); ``health.value`` defaults to 1 when the health plugin is not loaded.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from foxhunt import (
    MONITOR_STATE_PREFIX,
    AdaptiveMonitor,
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
from foxhunt.contract import PROGRESS
from foxhunt.kernels import DualKernel, device_constants, device_function
from foxhunt_plugins.adaptive.common import BoundRun, clamp, param_tensor, read_or, slot_offsets
from foxhunt_plugins.adaptive.validators import rate, unit

__all__ = ["TauSettings", "VALUE", "TAU_INIT", "TauSlot", "TauParam", "TauMonitor", "TAU_KERNEL", "tau_params",
           "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

VALUE = contract.TAU
HEALTH = contract.HEALTH
TAU_INIT = 0.005  # the learner's default τ, used until the first update of a fold


class TauSlot(DimTable):
    """Positions in the τ kernel's slot-offset vector."""

    VALUE = auto()
    PROGRESS = auto()
    HEALTH = auto()


class TauParam(DimTable):
    """Positions in the τ kernel's parameter vector."""

    START = auto()
    END = auto()
    FLOOR_MIN = auto()
    FLOOR_MAX = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
TAU_PARAM = device_constants(TauParam)
TAU_SLOT = device_constants(TauSlot)


@device_function
def _tau_row(i, args):
    isv, off, prm = args
    progress = clamp(isv[off[TAU_SLOT.PROGRESS]], 0.0, 1.0)
    health = clamp(read_or(isv, off[TAU_SLOT.HEALTH], 1.0), 0.0, 1.0)
    start = prm[TAU_PARAM.START]
    end = prm[TAU_PARAM.END]
    scheduled = end + 0.5 * (start - end) * (1.0 + math.cos(math.pi * progress))
    floor = prm[TAU_PARAM.FLOOR_MIN] + (prm[TAU_PARAM.FLOOR_MAX] - prm[TAU_PARAM.FLOOR_MIN]) * (1.0 - health)
    isv[off[TAU_SLOT.VALUE]] = clamp(max(scheduled, floor), 0.0, 1.0)


TAU_KERNEL = DualKernel(_tau_row, "tau.update")


@attrs.frozen
class TauSettings:
    """``[plugins.tau]``: cosine schedule of the Polyak rate from ``start`` to ``end`` over a fold.

    The floor rises linearly from ``floor_min`` (health 1) to ``floor_max`` (health 0).
    """

    start: float = attrs.field(default=0.01, validator=rate)
    end: float = attrs.field(default=0.001, validator=rate)
    floor_min: float = attrs.field(default=0.001, validator=unit)
    floor_max: float = attrs.field(default=0.005, validator=unit)

    def __attrs_post_init__(self) -> None:
        if self.end > self.start:
            raise ValueError(f"end ({self.end}) must not exceed start ({self.start})")
        if self.floor_min > self.floor_max:
            raise ValueError(f"floor_min ({self.floor_min}) must not exceed floor_max ({self.floor_max})")


def tau_params(settings: TauSettings) -> list[float]:
    params = [0.0] * TauParam.size()
    params[TauParam.START] = settings.start
    params[TauParam.END] = settings.end
    params[TauParam.FLOOR_MIN] = settings.floor_min
    params[TauParam.FLOOR_MAX] = settings.floor_max
    return params


class TauMonitor(AdaptiveMonitor):
    """Observes the Polyak rate."""

    name = "tau"
    reads = (VALUE,)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(TauSettings)
    registrar.slot(VALUE, init=TAU_INIT, doc="Polyak target-update rate τ (cosine schedule, health-coupled floor)")
    registrar.state(VALUE, ResetCategory.FOLD_RESET, doc="recomputed from progress and health at every update")
    registrar.state(MONITOR_STATE_PREFIX + TauMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the τ monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any, settings: TauSettings) -> list[Kernel]:
    params = tau_params(settings)

    def bind(context):
        offsets = slot_offsets(context, (VALUE, PROGRESS, HEALTH), optional=(HEALTH,))
        return [(TAU_KERNEL, 1, (context.isv, offsets, param_tensor(params, context)))]

    return [
        Kernel(
            name="tau.update",
            point=KernelPoint.STEP,
            run=BoundRun(bind),
            description="Polyak rate: cosine schedule over train.progress with a floor rising as health falls",
            writes=(VALUE,),
            reads=(PROGRESS, HEALTH),
            optional_reads=(HEALTH,),  # 1.0 when the health plugin is not loaded
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [TauMonitor()]
