"""Validation backtests of a fold and the run's summary across folds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from foxhunt.env.backtest import METRIC_KEYS, BacktestResult, equity_ratios

__all__ = ["SUMMARY_KEYS", "POLICIES", "greedy_policy", "metrics_of", "combine", "better"]

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
    chained = np.cumprod(np.concatenate([[1.0], 1.0 + returns]))
    sharpe, sortino, max_drawdown = equity_ratios(chained, bars_per_year)
    return {
        "net_pnl": float(sum(curve[-1] - curve[0] for curve in curves)),
        "sharpe": sharpe,
        "sortino": _finite(sortino),
        "max_drawdown": max_drawdown,
        "turnover": float(sum(turnovers)),
        "trades": int(sum(trades)),
    }
