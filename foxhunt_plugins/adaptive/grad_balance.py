"""Per-branch gradient scales that steer each branch's share of the gradient toward configured targets.

The learner weights each branch's term of every loss by ``grad_balance.scale``
and reports ``learner.branch_grad_norm`` (the norm of each branch's gradient
*as scaled* in that update). Per branch ``b``, with targets ``t_b``:

- unscaled norm ``u_b = g_b / s_b``;
- ideal scale ``w_b = t_b / max(u_b, ε)``, normalised to mean 1 over the
  branches and clamped: ``s*_b = clamp(w_b / mean(w), 1 / limit, limit)``;
- ``s_b ← s_b + (s*_b − s_b) / GRAD_BALANCE_DECAY_STEPS``.

Normalising to mean 1 moves gradient *between* branches without changing
the total, which the per-component budgets already bound; the limit keeps a
branch with a vanishing gradient from taking an unbounded weight. Soft-reset:
every fold starts from scale 1 (no preference) and decays toward the balance
of the fold's own gradients. One device row (it normalises across branches),
after every learner update.
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
from foxhunt_plugins.adaptive.common import N_BRANCHES, BoundRun, clamp, param_tensor, signal_of, slot_offsets
from foxhunt_plugins.adaptive.validators import all_positive, branch_width, per_branch

__all__ = ["GradBalanceSettings", "SCALE", "SCALE_BOOTSTRAP", "GRAD_BALANCE_DECAY_STEPS", "SIGNALS", "BalanceSlot", "BalanceParam",
           "GradBalanceMonitor", "GRAD_BALANCE_KERNEL", "grad_balance_params",
           "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

SCALE = contract.GRAD_BALANCE
SCALE_BOOTSTRAP = 1.0
GRAD_BALANCE_DECAY_STEPS = 100
NORM_EPS = 1e-8

BRANCH_GRAD_NORM = contract.BRANCH_GRAD_NORM
SIGNALS = {BRANCH_GRAD_NORM: (N_BRANCHES,)}


class BalanceSlot(DimTable):
    """Positions in the balance kernel's slot-offset vector."""

    SCALE = auto()


class BalanceParam(DimTable):
    """Columns of the balance kernel's parameter table ``[Branch, BalanceParam]``."""

    TARGET = auto()
    LIMIT = auto()
    RATE = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
BALANCE_PARAM = device_constants(BalanceParam)
BALANCE_SLOT = device_constants(BalanceSlot)


@device_function
def _balance_row(i, args):
    isv, off, prm, norms = args
    start = off[BALANCE_SLOT.SCALE]
    mean_weight = 0.0
    for b in range(N_BRANCHES):
        unscaled = norms[b] / max(isv[start + b], NORM_EPS)
        mean_weight += prm[b, BALANCE_PARAM.TARGET] / max(unscaled, NORM_EPS)
    mean_weight /= N_BRANCHES
    # every branch reads the scales of the same update before any is overwritten: two passes
    for b in range(N_BRANCHES):
        scale = isv[start + b]
        unscaled = norms[b] / max(scale, NORM_EPS)
        weight = prm[b, BALANCE_PARAM.TARGET] / max(unscaled, NORM_EPS)
        limit = prm[b, BALANCE_PARAM.LIMIT]
        target = clamp(weight / mean_weight, 1.0 / limit, limit)
        isv[start + b] = scale + prm[b, BALANCE_PARAM.RATE] * (target - scale)


GRAD_BALANCE_KERNEL = DualKernel(_balance_row, "grad_balance.update")


@attrs.frozen
class GradBalanceSettings:
    """``[plugins.grad_balance]``: relative per-branch gradient targets and the scale limit.

    Scales stay within ``[1 / limit, limit]``.
    """

    targets: tuple[float, ...] = attrs.field(default=(1.0, 1.0, 1.0, 1.0), converter=per_branch, validator=[branch_width, all_positive])
    limit: float = attrs.field(default=4.0, validator=attrs.validators.ge(1.0))


def grad_balance_params(settings: GradBalanceSettings) -> list[list[float]]:
    """Parameter table ``[Branch, BalanceParam]``."""
    table = [[0.0] * BalanceParam.size() for _ in Branch]
    for branch in Branch:
        table[branch][BalanceParam.TARGET] = settings.targets[branch]
        table[branch][BalanceParam.LIMIT] = settings.limit
        table[branch][BalanceParam.RATE] = 1.0 / GRAD_BALANCE_DECAY_STEPS
    return table


class GradBalanceMonitor(AdaptiveMonitor):
    """Observes the per-branch gradient scales."""

    name = "grad_balance"
    reads = (SCALE,)
    labels = {SCALE: Branch.names()}


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(GradBalanceSettings)
    registrar.slot(SCALE, width=len(Branch), init=SCALE_BOOTSTRAP,
                   doc="per-branch weight of every loss's branch term [Branch], toward configured gradient targets")
    registrar.state(SCALE, ResetCategory.SOFT_RESET, decay_steps=GRAD_BALANCE_DECAY_STEPS,
                    doc=f"bootstrap {SCALE_BOOTSTRAP} at each fold, then an EMA toward the balancing scale")
    registrar.state(MONITOR_STATE_PREFIX + GradBalanceMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the gradient-balance monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any, settings: GradBalanceSettings) -> list[Kernel]:
    params = grad_balance_params(settings)

    def bind(context):
        tensors = (
            context.isv,
            slot_offsets(context, (SCALE,)),
            param_tensor(params, context),
            signal_of(context, BRANCH_GRAD_NORM, SIGNALS[BRANCH_GRAD_NORM], GRAD_BALANCE_KERNEL.name),
        )
        return [(GRAD_BALANCE_KERNEL, 1, tensors)]

    return [
        Kernel(
            name="grad_balance.update",
            point=KernelPoint.STEP,
            run=BoundRun(bind),
            description="per-branch gradient scales toward configured targets, within a scale limit",
            writes=(SCALE,),
            reads=tuple(SIGNALS),
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [GradBalanceMonitor()]
