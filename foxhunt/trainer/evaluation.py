"""Validation backtests of a fold and the run's summary across folds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch

from foxhunt.actions import BRANCH_TABLES, Branch, Direction
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.env.backtest import METRIC_KEYS, BacktestResult, backtest, constant_policy
from foxhunt.env.config import EnvConfig

__all__ = ["SUMMARY_KEYS", "POLICIES", "greedy_policy", "baseline_results", "metrics_of", "combine", "better", "action_names"]

SUMMARY_KEYS = ("net_pnl", "sharpe", "sortino", "max_drawdown", "turnover", "trades")
POLICIES = ("agent", "buy_and_hold", "flat")


def greedy_policy(act_values, device: torch.device | str = "cpu") -> Any:
    """Observation ``[1, obs]`` -> the argmax action of every branch ``[1, Branch]`` (padded actions are -inf).

    Backtests step one environment in float64 on the CPU; the network may live on
    ``device``, so observations go there and actions come back (a validation-time copy,
    not the training step).
    """

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return act_values(obs.to(device)).argmax(dim=-1).cpu()

    return policy


def baseline_results(
    prices: np.ndarray, features: np.ndarray, instrument: InstrumentSpec, config: EnvConfig, window: tuple[int, int]
) -> dict[str, BacktestResult]:
    """Buy-and-hold one contract and always-flat over ``window``: they do not change between epochs."""
    one_contract = _one_contract(config)
    return {
        "buy_and_hold": backtest(constant_policy(Direction.LONG), prices, features, instrument, one_contract, window=window),
        "flat": backtest(constant_policy(Direction.FLAT), prices, features, instrument, config, window=window),
    }


def _one_contract(config: EnvConfig) -> EnvConfig:
    return attrs.evolve(config, max_contracts=1, kelly_min_contracts=1)


def metrics_of(result: BacktestResult) -> dict[str, float]:
    """The metric values of a result (no equity curve), JSON-ready."""
    return {key: _finite(getattr(result, key)) for key in METRIC_KEYS}


def _finite(value: float) -> float:
    # JSON has no infinity; an unbounded ratio (a positive mean with no downside at all) is capped.
    value = float(value)
    return value if math.isfinite(value) else (1e9 if value > 0 else -1e9)


def better(metric: str, candidate: float, incumbent: float | None) -> bool:
    """Whether ``candidate`` beats ``incumbent`` on ``metric`` (lower drawdown is better)."""
    if incumbent is None:
        return True
    return candidate < incumbent if metric == "max_drawdown" else candidate > incumbent


def combine(curves: Sequence[np.ndarray], trades: Sequence[int], turnovers: Sequence[float], bars_per_year: float) -> dict[str, float]:
    """Overall metrics of consecutive validation windows: each fold's equity restarts from the same cash,
    so the windows are chained through their per-bar returns."""
    returns = np.concatenate([curve[1:] / curve[:-1] - 1.0 for curve in curves]) if curves else np.zeros(0)
    pnl = float(sum(curve[-1] - curve[0] for curve in curves))
    if len(returns) > 1 and np.std(returns, ddof=1) > 0:
        sharpe = float(np.mean(returns) / np.std(returns, ddof=1) * math.sqrt(bars_per_year))
    else:
        sharpe = 0.0
    downside = float(np.sqrt(np.mean(np.minimum(returns, 0.0) ** 2))) if len(returns) else 0.0
    mean = float(np.mean(returns)) if len(returns) else 0.0
    sortino = mean / downside * math.sqrt(bars_per_year) if downside > 0 else 0.0
    chained = np.cumprod(np.concatenate([[1.0], 1.0 + returns]))
    peaks = np.maximum.accumulate(chained)
    return {
        "net_pnl": pnl,
        "sharpe": sharpe,
        "sortino": float(sortino),
        "max_drawdown": float(np.max((peaks - chained) / peaks)),
        "turnover": float(sum(turnovers)),
        "trades": int(sum(trades)),
    }


def action_names() -> dict[str, list[str]]:
    """Sub-action names per branch (for the action-distribution plot)."""
    return {branch.name: list(BRANCH_TABLES[branch].names()) for branch in Branch}
