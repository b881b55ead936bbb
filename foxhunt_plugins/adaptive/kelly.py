"""The aggregate Kelly cap: one position-size fraction from every environment's win/loss statistics.

Sums over every environment's portfolio row (``env.portfolio [envs, PS]``):
wins ``W``, losses ``L``, win total ``S_W``, loss total ``S_L`` (positive).
With prior pseudo-trades ``a`` wins and ``b`` losses (default 2 and 2):

- win probability ``p = (W + a) / (W + L + a + b)``;
- the prior trades carry the pooled mean trade size ``m = (S_W + S_L) / (W + L)``
  (1 before any trade), so the payoff ratio shrinks toward 1 on little data:
  ``R = ((S_W + a m) / (W + a)) / ((S_L + b m) / (L + b))``;
- Kelly fraction ``f = clamp(p − (1 − p) / R, 0, 1)``;
- maturity warm-up ``μ = min(1, (W + L) / warmup_trades)``: the cap blends
  from 1 (no evidence yet: let the agent trade to gather it) to ``f``;
- safety ``s = safety_floor + (1 − safety_floor) × health`` (0.5 + 0.5 × health);
- ``kelly.cap = clamp(s × ((1 − μ) + μ f), min_cap, 1)``, a fraction of the
  maximum position that the environment applies to its position cap.

Two launches after every learner update: partial sums over ``ceil(sqrt(envs))``
chunks of environments into a private float64 scratch, then one row that adds
the chunks and writes the cap. ``health.value`` defaults to 1 when the health
plugin is not loaded.
"""

from __future__ import annotations

import math
from typing import Any

import torch

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
from foxhunt.env.tables import PS
from foxhunt.kernels import DualKernel, device_constants, device_function
from foxhunt_plugins.adaptive.common import BoundRun, clamp, param_tensor, read_or, slot_offsets
from foxhunt_plugins.adaptive.validators import non_negative, positive, unit

__all__ = ["KellySettings", "CAP", "KELLY_INIT", "PORTFOLIO", "KellySlot", "KellyParam", "KellySum", "KellyMonitor",
           "KELLY_SUM_KERNEL", "KELLY_CAP_KERNEL", "kelly_params", "chunk_count",
           "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

CAP = contract.KELLY_CAP
HEALTH = contract.HEALTH
PORTFOLIO = contract.PORTFOLIO
KELLY_INIT = 1.0  # no trade seen yet: the warm-up leaves the position cap untouched
TINY = 1e-12


class KellySlot(DimTable):
    """Positions in the Kelly kernel's slot-offset vector."""

    CAP = auto()
    HEALTH = auto()


class KellyParam(DimTable):
    """Positions in the Kelly kernel's parameter vector."""

    PRIOR_WINS = auto()
    PRIOR_LOSSES = auto()
    WARMUP_TRADES = auto()
    SAFETY_FLOOR = auto()
    MIN_CAP = auto()


class KellySum(DimTable):
    """Columns of the partial sums ``[chunks, KellySum]``."""

    WINS = auto()
    LOSSES = auto()
    WIN_SUM = auto()
    LOSS_SUM = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
KELLY_PARAM = device_constants(KellyParam)
KELLY_SLOT = device_constants(KellySlot)
KELLY_SUM = device_constants(KellySum)
PS_INDEX = device_constants(PS)


@device_function
def _sum_row(c, args):
    portfolio, partial = args
    envs = portfolio.shape[0]
    chunks = partial.shape[0]
    size = (envs + chunks - 1) // chunks
    wins = 0.0
    losses = 0.0
    win_sum = 0.0
    loss_sum = 0.0
    for e in range(c * size, min(envs, (c + 1) * size)):
        wins += portfolio[e, PS_INDEX.WINS]
        losses += portfolio[e, PS_INDEX.LOSSES]
        win_sum += portfolio[e, PS_INDEX.WIN_SUM]
        loss_sum += portfolio[e, PS_INDEX.LOSS_SUM]
    partial[c, KELLY_SUM.WINS] = wins
    partial[c, KELLY_SUM.LOSSES] = losses
    partial[c, KELLY_SUM.WIN_SUM] = win_sum
    partial[c, KELLY_SUM.LOSS_SUM] = loss_sum


@device_function
def _cap_row(i, args):
    isv, off, prm, partial = args
    wins = 0.0
    losses = 0.0
    win_sum = 0.0
    loss_sum = 0.0
    for c in range(partial.shape[0]):
        wins += partial[c, KELLY_SUM.WINS]
        losses += partial[c, KELLY_SUM.LOSSES]
        win_sum += partial[c, KELLY_SUM.WIN_SUM]
        loss_sum += partial[c, KELLY_SUM.LOSS_SUM]
    a = prm[KELLY_PARAM.PRIOR_WINS]
    b = prm[KELLY_PARAM.PRIOR_LOSSES]
    trades = wins + losses
    mean_size = (win_sum + loss_sum) / trades if trades > 0.0 else 1.0
    if not mean_size > 0.0:
        mean_size = 1.0
    p = (wins + a) / (trades + a + b)
    avg_win = (win_sum + a * mean_size) / (wins + a)
    avg_loss = (loss_sum + b * mean_size) / (losses + b)
    ratio = avg_win / max(avg_loss, TINY)
    fraction = clamp(p - (1.0 - p) / max(ratio, TINY), 0.0, 1.0)
    warmup = prm[KELLY_PARAM.WARMUP_TRADES]
    maturity = min(1.0, trades / warmup) if warmup > 0.0 else 1.0
    health = clamp(read_or(isv, off[KELLY_SLOT.HEALTH], 1.0), 0.0, 1.0)
    floor = prm[KELLY_PARAM.SAFETY_FLOOR]
    safety = floor + (1.0 - floor) * health
    blended = (1.0 - maturity) + maturity * fraction
    isv[off[KELLY_SLOT.CAP]] = clamp(safety * blended, prm[KELLY_PARAM.MIN_CAP], 1.0)


KELLY_SUM_KERNEL = DualKernel(_sum_row, "kelly.sum")
KELLY_CAP_KERNEL = DualKernel(_cap_row, "kelly.update")


@attrs.frozen
class KellySettings:
    """``[plugins.kelly]``: Bayesian Kelly fraction over every environment's round trips.

    The cap is a fraction of the maximum position: ``safety × blend`` where
    ``blend`` moves from 1 to the Kelly fraction over ``warmup_trades`` trades
    and ``safety = safety_floor + (1 − safety_floor) × health``.
    """

    prior_wins: float = attrs.field(default=2.0, validator=positive)
    prior_losses: float = attrs.field(default=2.0, validator=positive)
    warmup_trades: float = attrs.field(default=50.0, validator=non_negative)
    safety_floor: float = attrs.field(default=0.5, validator=unit)
    min_cap: float = attrs.field(default=0.05, validator=unit)  # keeps some trading, so the statistics can recover


def kelly_params(settings: KellySettings) -> list[float]:
    params = [0.0] * KellyParam.size()
    params[KellyParam.PRIOR_WINS] = settings.prior_wins
    params[KellyParam.PRIOR_LOSSES] = settings.prior_losses
    params[KellyParam.WARMUP_TRADES] = settings.warmup_trades
    params[KellyParam.SAFETY_FLOOR] = settings.safety_floor
    params[KellyParam.MIN_CAP] = settings.min_cap
    return params


def chunk_count(envs: int) -> int:
    """Chunks of the first reduction pass: ``ceil(sqrt(envs))`` balances the two passes."""
    return max(1, math.ceil(math.sqrt(envs)))


class KellyMonitor(AdaptiveMonitor):
    """Observes the aggregate Kelly cap."""

    name = "kelly"
    reads = (CAP,)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(KellySettings)
    registrar.slot(CAP, init=KELLY_INIT,
                   doc="aggregate Kelly cap: fraction of the maximum position, from every environment's trades")
    registrar.state(CAP, ResetCategory.FOLD_RESET, doc="recomputed from the portfolio table at every update")
    registrar.state(MONITOR_STATE_PREFIX + KellyMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the Kelly monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any, settings: KellySettings) -> list[Kernel]:
    params = kelly_params(settings)

    def bind(context):
        portfolio = context.signal(PORTFOLIO)
        if portfolio.dim() != 2 or portfolio.shape[1] != PS.size():
            raise ValueError(f"kernel 'kelly.update': signal {PORTFOLIO!r} must be [envs, PS={PS.size()}], "
                             f"got {list(portfolio.shape)}")
        chunks = chunk_count(portfolio.shape[0])
        partial = torch.zeros((chunks, KellySum.size()), dtype=torch.float64, device=context.device)
        offsets = slot_offsets(context, (CAP, HEALTH), optional=(HEALTH,))
        return [
            (KELLY_SUM_KERNEL, chunks, (portfolio, partial)),
            (KELLY_CAP_KERNEL, 1, (context.isv, offsets, param_tensor(params, context), partial)),
        ]

    return [
        Kernel(
            name="kelly.update",
            point=KernelPoint.STEP,
            run=BoundRun(bind),
            description="aggregate Bayesian Kelly cap over every environment's round trips, warm-up and health safety",
            writes=(CAP,),
            reads=(HEALTH, PORTFOLIO),
            optional_reads=(HEALTH,),  # 1.0 (full safety) when the health plugin is not loaded
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [KellyMonitor()]
