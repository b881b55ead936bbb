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

from foxhunt.adaptive_config import adaptive_config_of
from foxhunt.core_declarations import PROGRESS
from foxhunt.dims import DimTable, auto
from foxhunt.hookspecs import hookimpl
from foxhunt.kernels import DualKernel, device_function
from foxhunt.monitors import MONITOR_STATE_PREFIX, AdaptiveMonitor, reset_monitor
from foxhunt.records import Kernel, KernelPoint
from foxhunt.registrar import Registrar
from foxhunt.state import ResetCategory
from foxhunt_plugins.adaptive.common import BoundRun, clamp, param_tensor, read_or, slot_offsets

__all__ = ["VALUE", "TAU_INIT", "TauSlot", "TauParam", "TauMonitor", "TAU_KERNEL", "tau_params",
           "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

VALUE = "tau.value"
HEALTH = "health.value"
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


@device_function
def _tau_row(i, args):
    isv, off, prm = args
    progress = clamp(isv[off[TauSlot.PROGRESS]], 0.0, 1.0)
    health = clamp(read_or(isv, off[TauSlot.HEALTH], 1.0), 0.0, 1.0)
    start = prm[TauParam.START]
    end = prm[TauParam.END]
    scheduled = end + 0.5 * (start - end) * (1.0 + math.cos(math.pi * progress))
    floor = prm[TauParam.FLOOR_MIN] + (prm[TauParam.FLOOR_MAX] - prm[TauParam.FLOOR_MIN]) * (1.0 - health)
    isv[off[TauSlot.VALUE]] = clamp(max(scheduled, floor), 0.0, 1.0)


TAU_KERNEL = DualKernel(_tau_row, "tau.update")


def tau_params(config: Any) -> list[float]:
    cfg = adaptive_config_of(config).tau
    params = [0.0] * TauParam.size()
    params[TauParam.START] = cfg.start
    params[TauParam.END] = cfg.end
    params[TauParam.FLOOR_MIN] = cfg.floor_min
    params[TauParam.FLOOR_MAX] = cfg.floor_max
    return params


class TauMonitor(AdaptiveMonitor):
    """Observes the Polyak rate."""

    name = "tau"
    reads = (VALUE,)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.slot(VALUE, init=TAU_INIT, doc="Polyak target-update rate τ (cosine schedule, health-coupled floor)")
    registrar.state(VALUE, ResetCategory.FOLD_RESET, doc="recomputed from progress and health at every update")
    registrar.state(MONITOR_STATE_PREFIX + TauMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the τ monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any) -> list[Kernel]:
    params = tau_params(config)

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
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [TauMonitor()]
