"""The environment's configuration, and its translation into the kernel's parameter vector."""

from __future__ import annotations

import math

import attrs
import numpy as np

from foxhunt.actions import Urgency
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.env.tables import EP

__all__ = ["EnvConfig", "physics_params"]

_int64 = attrs.validators.le(2**63 - 1)  # counts reach int64 tensors and the float64 parameter vector
_positive = attrs.validators.gt(0)
_non_negative = attrs.validators.ge(0)
_count = [_positive, _int64]


def _per_urgency(instance: object, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if len(value) != Urgency.size() or any(not v >= 0 for v in value):
        raise ValueError(f"{attribute.name} needs {Urgency.size()} non-negative values (PASSIVE, NORMAL, AGGRESSIVE)")


def _floats(value: object) -> tuple[float, ...]:
    return tuple(float(v) for v in value)  # type: ignore[union-attr]


@attrs.frozen(kw_only=True)
class EnvConfig:
    """How the vectorised futures environment behaves (see docs/fill-model.md).

    Spread and commission come from the :class:`InstrumentSpec` unless
    ``commission`` overrides it. Rewards are in units of ``reward_scale`` money
    (default: 1 % of ``initial_cash``), which keeps a bar's reward near O(1)
    for a position sized to the account.
    """

    n_envs: int = attrs.field(default=64, validator=_count)
    episode_bars: int = attrs.field(default=512, validator=_count)
    initial_cash: float = attrs.field(default=100_000.0, validator=_positive)
    max_contracts: int = attrs.field(default=10, validator=_count)
    commission: float | None = attrs.field(default=None)  # per contract per side; None: the instrument's
    slippage_ticks: float = attrs.field(default=0.5, validator=_non_negative)  # market orders, NORMAL urgency
    slippage_by_urgency: tuple[float, ...] = attrs.field(default=(0.5, 1.0, 2.0), converter=_floats, validator=_per_urgency)
    limit_offset_ticks: tuple[float, ...] = attrs.field(default=(2.0, 1.0, 0.0), converter=_floats, validator=_per_urgency)
    margin_fraction: float = attrs.field(default=0.5, validator=[_positive, attrs.validators.le(1.0)])
    kelly_prior_wins: float = attrs.field(default=2.0, validator=_positive)
    kelly_prior_losses: float = attrs.field(default=2.0, validator=_positive)
    kelly_warmup_trades: int = attrs.field(default=20, validator=[_non_negative, _int64])
    kelly_min_contracts: int = attrs.field(default=1, validator=[_non_negative, _int64])
    w_pnl: float = 1.0
    w_cost: float = 1.0
    w_holding: float = attrs.field(default=0.0, validator=_non_negative)  # money per contract per bar held
    w_churn: float = attrs.field(default=0.0, validator=_non_negative)  # money per contract reversed at once
    churn_bars: int = attrs.field(default=10, validator=_count)  # churn penalty fades to zero over these bars
    w_drawdown: float = attrs.field(default=0.0, validator=_non_negative)  # per unit of money the drawdown deepens
    reward_scale: float | None = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        if self.commission is not None and not self.commission >= 0:
            raise ValueError(f"commission must be >= 0, got {self.commission!r}")
        if self.reward_scale is not None and not self.reward_scale > 0:
            raise ValueError(f"reward_scale must be > 0, got {self.reward_scale!r}")
        if self.kelly_min_contracts > self.max_contracts:
            raise ValueError("kelly_min_contracts cannot exceed max_contracts")

    @property
    def resolved_reward_scale(self) -> float:
        """Money per unit of reward."""
        return self.reward_scale if self.reward_scale is not None else 0.01 * self.initial_cash


def physics_params(
    config: EnvConfig,
    instrument: InstrumentSpec,
    window: tuple[int, int],
    *,
    random_start: bool = True,
    auto_reset: bool = True,
    execution_part: bool = False,
) -> np.ndarray:
    """The kernel's parameter vector ``[EP]`` (float64; the caller casts it to the state dtype)."""
    start, end = window
    if end - start < 2:
        raise ValueError(f"window [{start}, {end}) needs at least two bars (a decision bar and a fill bar)")
    params = np.zeros(EP.size(), dtype=np.float64)
    commission = instrument.commission if config.commission is None else config.commission
    params[EP.MULTIPLIER] = instrument.multiplier
    params[EP.TICK] = instrument.tick_size
    params[EP.HALF_SPREAD] = 0.5 * instrument.spread_ticks * instrument.tick_size
    params[EP.COMMISSION] = commission
    params[EP.SLIPPAGE] = config.slippage_ticks * instrument.tick_size
    params[EP.SLIP_PASSIVE] = config.slippage_by_urgency[Urgency.PASSIVE]
    params[EP.SLIP_NORMAL] = config.slippage_by_urgency[Urgency.NORMAL]
    params[EP.SLIP_AGGRESSIVE] = config.slippage_by_urgency[Urgency.AGGRESSIVE]
    params[EP.LIMIT_PASSIVE] = config.limit_offset_ticks[Urgency.PASSIVE]
    params[EP.LIMIT_NORMAL] = config.limit_offset_ticks[Urgency.NORMAL]
    params[EP.LIMIT_AGGRESSIVE] = config.limit_offset_ticks[Urgency.AGGRESSIVE]
    params[EP.INITIAL_CASH] = config.initial_cash
    params[EP.MAX_CONTRACTS] = config.max_contracts
    params[EP.INV_MAX_CONTRACTS] = 1.0 / config.max_contracts
    params[EP.INV_EPISODE_BARS] = 1.0 / config.episode_bars
    params[EP.INITIAL_MARGIN] = instrument.initial_margin
    params[EP.MARGIN_FRACTION] = config.margin_fraction
    params[EP.KELLY_PRIOR_WINS] = config.kelly_prior_wins
    params[EP.KELLY_PRIOR_LOSSES] = config.kelly_prior_losses
    params[EP.KELLY_WARMUP_TRADES] = config.kelly_warmup_trades
    params[EP.KELLY_MIN_CONTRACTS] = config.kelly_min_contracts
    params[EP.W_PNL] = config.w_pnl
    params[EP.W_COST] = config.w_cost
    params[EP.W_HOLDING] = config.w_holding
    params[EP.W_CHURN] = config.w_churn
    params[EP.CHURN_BARS] = config.churn_bars
    params[EP.W_DRAWDOWN] = config.w_drawdown
    params[EP.REWARD_SCALE] = config.resolved_reward_scale
    params[EP.EPISODE_BARS] = config.episode_bars
    params[EP.WINDOW_START] = start
    params[EP.WINDOW_END] = end
    params[EP.RANDOM_START] = 1.0 if random_start else 0.0
    params[EP.AUTO_RESET] = 1.0 if auto_reset else 0.0
    params[EP.EXECUTION_PART] = 1.0 if execution_part else 0.0
    if not all(math.isfinite(v) for v in params):
        raise ValueError("environment parameters must be finite")
    return params
