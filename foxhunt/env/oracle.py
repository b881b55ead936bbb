"""The oracle of a synthetic market, traded through foxhunt's own physics.

The oracle is a threshold policy on the market's model (``synthetic/signal.py``):
at the close of bar t it knows ``m_t = E[r_(t+1) | closes <= t]`` and the one-way
cost ``c_t`` of a unit of notional (a PASSIVE market order: half the spread, the
PASSIVE slippage and the commission, over ``close_t * multiplier``), and targets

    +1 if m_t >  k * c_t,      -1 if m_t < -k * c_t,
    otherwise its previous target (band "hold") or 0 (band "flat").

It starts every window flat. ``k`` and the band are chosen once per model and cost
(not per market, so no bar of any evaluated market informs them): the pair with the
best unit-position Sharpe after costs on a 200,000-bar calibration path of the same
model drawn from its own fixed seed. A change of target is sent to the environment
as a FULL market order at PASSIVE urgency (LONG, SHORT or FLAT), otherwise HOLD, and
:func:`oracle_backtest` runs those actions through :func:`foxhunt.env.backtest.backtest`
with the run's :class:`EnvConfig` and the market's instrument: the same fills, costs,
margin, Kelly and contract caps as the agent's evaluation, so agent/oracle is a fair ratio.
"""

from __future__ import annotations

import functools
import math

import attrs
import numba
import numpy as np
import torch

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.market import MarketData
from foxhunt.data.synthetic import SyntheticSpec, conditional_mean, log_returns, spec_of
from foxhunt.env.backtest import BacktestResult, backtest
from foxhunt.env.config import EnvConfig

__all__ = [
    "BANDS",
    "THRESHOLDS",
    "CALIBRATION_BARS",
    "ThresholdPolicy",
    "order_cost_per_contract",
    "relative_cost",
    "threshold_targets",
    "calibrate",
    "oracle_policy",
    "oracle_targets",
    "oracle_orders",
    "oracle_backtest",
    "actions_backtest",
]

BANDS = ("hold", "flat")
# Multiples of the one-way cost the expected next-bar return must beat before the oracle trades.
THRESHOLDS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)
CALIBRATION_BARS = 200_000
# Any fixed seed would do; what matters is that it is not the evaluated market's.
CALIBRATION_SEED = 918_273_645


@attrs.frozen
class ThresholdPolicy:
    """Trade toward ``sign(m)`` when ``|m| > threshold * cost``; inside the band hold the target or go flat."""

    threshold: float
    band: str = attrs.field(validator=attrs.validators.in_(BANDS))
    calibration_sharpe: float = attrs.field(default=0.0, eq=False)  # annualised, unit position, calibration path


def order_cost_per_contract(instrument: InstrumentSpec, config: EnvConfig) -> float:
    """Money paid per contract of a PASSIVE market order (docs/fill-model.md: spread, slippage, commission)."""
    commission = instrument.commission if config.commission is None else config.commission
    half_spread = 0.5 * instrument.spread_ticks * instrument.tick_size
    slippage = config.slippage_ticks * instrument.tick_size * config.slippage_by_urgency[Urgency.PASSIVE]
    return (half_spread + slippage) * instrument.multiplier + commission


def relative_cost(close: np.ndarray, instrument: InstrumentSpec, config: EnvConfig) -> np.ndarray:
    """One-way cost per unit of notional when trading at each close."""
    return order_cost_per_contract(instrument, config) / (np.asarray(close, dtype=np.float64) * instrument.multiplier)


@numba.njit(cache=True)
def threshold_targets(mean: np.ndarray, cost: np.ndarray, threshold: float, hold_in_band: bool, start: float) -> np.ndarray:
    """The policy's target (-1, 0, +1) at each bar, from the target ``start`` held before the first."""
    targets = np.empty(mean.shape[0])
    previous = start
    for t in range(mean.shape[0]):
        if mean[t] > threshold * cost[t]:
            previous = 1.0
        elif mean[t] < -threshold * cost[t]:
            previous = -1.0
        elif not hold_in_band:
            previous = 0.0
        targets[t] = previous
    return targets


@numba.njit(cache=True)
def _unit_sharpe_per_bar(targets: np.ndarray, close: np.ndarray, cost: np.ndarray) -> float:
    """Per-bar Sharpe of holding ``targets[t]`` units from close t to t+1, paying ``cost[t]`` per unit changed at t."""
    bars = targets.shape[0] - 1
    total, square, previous = 0.0, 0.0, 0.0
    for t in range(bars):
        pnl = targets[t] * (close[t + 1] / close[t] - 1.0) - cost[t] * abs(targets[t] - previous)
        previous = targets[t]
        total += pnl
        square += pnl * pnl
    mean = total / bars
    variance = square / bars - mean * mean
    return mean / math.sqrt(variance) if variance > 0.0 else 0.0


@functools.lru_cache(maxsize=64)
def _calibrated(model: SyntheticSpec, per_contract: float, multiplier: float, bars_per_year: float) -> ThresholdPolicy:
    returns, _ = log_returns(model)
    close = model.price * np.exp(np.cumsum(returns))
    mean = conditional_mean(model, close)
    cost = per_contract / (close * multiplier)
    best = ThresholdPolicy(THRESHOLDS[0], BANDS[0], 0.0)
    best_sharpe = -math.inf
    for threshold in THRESHOLDS:
        for band in BANDS:
            targets = threshold_targets(mean, cost, threshold, band == "hold", 0.0)
            sharpe = _unit_sharpe_per_bar(targets, close, cost)
            if sharpe > best_sharpe:
                best_sharpe = sharpe
                best = ThresholdPolicy(threshold, band, sharpe * math.sqrt(bars_per_year))
    return best


def calibrate(spec: SyntheticSpec, instrument: InstrumentSpec, config: EnvConfig) -> ThresholdPolicy:
    """The best (threshold, band) for this model and these costs, on the model's own calibration path."""
    model = attrs.evolve(spec, seed=CALIBRATION_SEED, bars=CALIBRATION_BARS)
    per_contract = order_cost_per_contract(instrument, config)
    return _calibrated(model, per_contract, instrument.multiplier, instrument.bars_per_year)


def oracle_policy(market: MarketData, config: EnvConfig) -> ThresholdPolicy:
    """The oracle's policy for a synthetic market traded under ``config``."""
    return calibrate(spec_of(market), market.instrument, config)


def _window(market: MarketData, window: tuple[int, int] | None) -> tuple[int, int]:
    start, stop = (0, len(market)) if window is None else (int(window[0]), int(window[1]))
    if not 0 <= start < stop <= len(market) or stop - start < 2:
        raise ValueError(f"window [{start}, {stop}) must hold at least two of the market's {len(market)} bars")
    return start, stop


def oracle_targets(market: MarketData, config: EnvConfig | None = None, window: tuple[int, int] | None = None) -> np.ndarray:
    """The oracle's target at each bar of ``window`` (decided at that bar's close), starting flat.

    Entry ``i`` is the target decided at bar ``window[0] + i`` from closes up to it.
    """
    config = EnvConfig() if config is None else config
    start, stop = _window(market, window)
    policy = oracle_policy(market, config)
    mean = conditional_mean(spec_of(market), market.close[:stop])  # closes after the window are never read
    cost = relative_cost(market.close[start:stop], market.instrument, config)
    return threshold_targets(mean[start:stop], cost, policy.threshold, policy.band == "hold", 0.0)


def oracle_orders(targets: np.ndarray) -> torch.Tensor:
    """Actions ``[bars, Branch]``: a FULL PASSIVE market order where the target changes (from flat), else HOLD."""
    targets = np.asarray(targets, dtype=np.float64)
    previous = np.r_[0.0, targets[:-1]]
    direction = np.full(len(targets), int(Direction.HOLD), dtype=np.int64)
    changed = targets != previous
    direction[changed & (targets > 0)] = Direction.LONG
    direction[changed & (targets < 0)] = Direction.SHORT
    direction[changed & (targets == 0)] = Direction.FLAT
    actions = torch.zeros((len(targets), Branch.size()), dtype=torch.int64)
    actions[:, Branch.DIRECTION] = torch.from_numpy(direction)
    actions[:, Branch.MAGNITUDE] = Magnitude.FULL
    actions[:, Branch.ORDER_TYPE] = OrderType.MARKET
    actions[:, Branch.URGENCY] = Urgency.PASSIVE
    return actions


def oracle_backtest(
    market: MarketData,
    config: EnvConfig | None = None,
    window: tuple[int, int] | None = None,
    *,
    device: torch.device | str = "cpu",
) -> BacktestResult:
    """The oracle's greedy backtest over ``window`` (default: the whole market) through the environment's physics.

    Same episode as an agent's validation backtest over that window (one environment,
    flat at ``window[0]``, marked at every close to ``window[1] - 1``), with the run's
    ``config`` and the market's instrument.
    """
    config = EnvConfig() if config is None else config
    start, stop = _window(market, window)
    actions = oracle_orders(oracle_targets(market, config, (start, stop)))
    return actions_backtest(market, actions, config, (start, stop), device=device)


def actions_backtest(
    market: MarketData,
    actions: torch.Tensor,
    config: EnvConfig,
    window: tuple[int, int] | None = None,
    *,
    device: torch.device | str = "cpu",
) -> BacktestResult:
    """Backtest fixed ``actions`` (``[bars of window, Branch]``, one row per bar from ``window[0]``) over ``window``
    (default: the whole market) through the environment's physics: a policy that reads its model, not features."""
    start, stop = _window(market, window)
    if len(actions) != stop - start:
        raise ValueError(f"{len(actions)} rows of actions for the window's {stop - start} bars")
    bar = iter(range(stop - start))

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return actions[next(bar)].reshape(1, Branch.size())

    features = np.zeros((len(market), 0), dtype=np.float32)
    return backtest(policy, market.ohlcv, features, market.instrument, config, window=(start, stop), device=device)
