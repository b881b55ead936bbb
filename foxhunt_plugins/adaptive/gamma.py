"""Per-branch discount γ, coupled to learning health, within configured per-branch bounds.

``γ_b = min_b + (max_b − min_b) × health``.

Why: the effective horizon is ``1 / (1 − γ)``. A long horizon compounds every
error of the bootstrapped target over many steps; when health falls, a shorter
horizon cuts that amplification until learning recovers, and γ returns to its
maximum as health does. Bounds are per branch because direction and magnitude
decide P&L over many bars, while order type and urgency mostly decide the next
fill's cost. One device row per branch, after every learner update;
``health.value`` defaults to 1 when the health plugin is not loaded.
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
from foxhunt.kernels import DualKernel, device_constants, device_function
from foxhunt_plugins.adaptive.common import N_BRANCHES, BoundRun, clamp, param_tensor, read_or, slot_offsets
from foxhunt_plugins.adaptive.validators import branch_unit, per_branch

__all__ = ["GammaSettings", "VALUE", "GAMMA_INIT", "GammaSlot", "GammaParam", "GammaMonitor", "GAMMA_KERNEL", "gamma_params",
           "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

VALUE = contract.GAMMA
HEALTH = contract.HEALTH
GAMMA_INIT = 0.99  # the learner's default γ, used until the first update of a fold


class GammaSlot(DimTable):
    """Positions in the γ kernel's slot-offset vector."""

    VALUE = auto()
    HEALTH = auto()


class GammaParam(DimTable):
    """Columns of the γ kernel's parameter table ``[Branch, GammaParam]``."""

    MIN = auto()
    MAX = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
GAMMA_PARAM = device_constants(GammaParam)
GAMMA_SLOT = device_constants(GammaSlot)


@device_function
def _gamma_row(b, args):
    isv, off, prm = args
    health = clamp(read_or(isv, off[GAMMA_SLOT.HEALTH], 1.0), 0.0, 1.0)
    low = prm[b, GAMMA_PARAM.MIN]
    isv[off[GAMMA_SLOT.VALUE] + b] = low + (prm[b, GAMMA_PARAM.MAX] - low) * health


GAMMA_KERNEL = DualKernel(_gamma_row, "gamma.update")


@attrs.frozen
class GammaSettings:
    """``[plugins.gamma]``: per-branch discount bounds; γ moves from ``minimum`` (health 0) to ``maximum`` (health 1).

    Direction and magnitude decide P&L over many bars (long horizon); order type
    and urgency mostly decide the next fill's cost (short horizon).
    """

    minimum: tuple[float, ...] = attrs.field(default=(0.95, 0.95, 0.90, 0.90), converter=per_branch, validator=branch_unit)
    maximum: tuple[float, ...] = attrs.field(default=(0.99, 0.99, 0.97, 0.97), converter=per_branch, validator=branch_unit)

    def __attrs_post_init__(self) -> None:
        if any(lo > hi for lo, hi in zip(self.minimum, self.maximum, strict=True)):
            raise ValueError(f"minimum {self.minimum} must not exceed maximum {self.maximum} per branch")


def gamma_params(settings: GammaSettings) -> list[list[float]]:
    """Parameter table ``[Branch, GammaParam]``."""
    table = [[0.0] * GammaParam.size() for _ in Branch]
    for branch in Branch:
        table[branch][GammaParam.MIN] = settings.minimum[branch]
        table[branch][GammaParam.MAX] = settings.maximum[branch]
    return table


class GammaMonitor(AdaptiveMonitor):
    """Observes the per-branch discounts."""

    name = "gamma"
    reads = (VALUE,)
    labels = {VALUE: Branch.names()}


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(GammaSettings)
    registrar.slot(VALUE, width=len(Branch), init=GAMMA_INIT, doc="discount per action branch [Branch], health-coupled")
    registrar.state(VALUE, ResetCategory.FOLD_RESET, doc="recomputed from health at every update")
    registrar.state(MONITOR_STATE_PREFIX + GammaMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the γ monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any, settings: GammaSettings) -> list[Kernel]:
    params = gamma_params(settings)

    def bind(context):
        offsets = slot_offsets(context, (VALUE, HEALTH), optional=(HEALTH,))
        return [(GAMMA_KERNEL, N_BRANCHES, (context.isv, offsets, param_tensor(params, context)))]

    return [
        Kernel(
            name="gamma.update",
            point=KernelPoint.STEP,
            run=BoundRun(bind),
            description="per-branch discount between configured bounds, rising with learning health",
            writes=(VALUE,),
            reads=(HEALTH,),
            optional_reads=(HEALTH,),  # 1.0 (the longest horizon) when the health plugin is not loaded
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [GammaMonitor()]
