"""Backtests of a fold (validation: selection; test: reported) and the run's summary across folds.

A fold's best epoch is chosen by its validation backtests; that one policy is
then backtested once on the fold's test window. The summary reports both, apart:
``overall`` chains the test windows (the honest out-of-sample figure),
``validation_overall`` chains the validation windows (optimistic by construction:
the best of several epochs was picked there).

Activity is counted twice: ``fills`` (bars on which an order filled) and
``round_trips`` (positions closed or reversed); see :mod:`foxhunt.env.backtest`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch

from foxhunt.data.instrument import InstrumentSpec
from foxhunt.env.backtest import METRIC_KEYS, BacktestResult, BarPolicy, StepKernel, backtest, baselines, equity_ratios
from foxhunt.env.config import EnvConfig

__all__ = ["SUMMARY_KEYS", "POLICIES", "WINDOWS", "RunBacktests", "greedy_policy", "metrics_of", "combine", "overall",
           "better", "run_summary"]

SUMMARY_KEYS = ("net_pnl", "sharpe", "sortino", "max_drawdown", "turnover", "fills", "round_trips")
POLICIES = ("agent", "buy_and_hold", "flat")
WINDOWS = ("validation", "test")  # the per-fold windows a summary reports, apart
PLAN_EXIT_KEYS = ("plan_stops", "plan_targets", "plan_expiries")  # with trade plans: positions each exit closed


def greedy_policy(act_values, device: torch.device | str = "cpu") -> BarPolicy:
    """Observation ``[1, obs]`` (and its bar ``[1]``) -> the argmax action of every branch ``[1, Branch]``
    (padded actions are -inf). ``act_values(obs, bars)`` is a learner's or a policy's: an encoder window
    gathers the bars before ``bars`` from its feature matrix.

    Backtests step one environment in float64 on the CPU; the network may live on
    ``device``, so observations go there and actions come back (a validation-time copy,
    not the training step).
    """

    def policy(obs: torch.Tensor, bars: torch.Tensor | None = None) -> torch.Tensor:
        return act_values(obs.to(device), None if bars is None else bars.to(device)).argmax(dim=-1).cpu()

    return BarPolicy(policy)


@attrs.frozen(eq=False)
class RunBacktests:
    """Backtests under a run's physics: its market prices, instrument, ``[env]`` settings and environment kernel.

    ``step_kernel`` is the ``run`` of the run's ``KernelPoint.ENV_STEP`` record (:mod:`foxhunt.env.run_kernel`),
    the very function its training environment steps with. The trainer's validation and test backtests and
    ``foxhunt backtest`` of a checkpoint are all made here, so what they report is that kernel's physics, the
    baselines' included.
    """

    prices: np.ndarray
    instrument: InstrumentSpec
    env: EnvConfig
    step_kernel: StepKernel
    isv: Any = None  # the run's ISV (foxhunt.isv.ISV): what the kernel reads besides the env, trade plans' slots

    def agent(self, act_values: Any, features: np.ndarray, window: tuple[int, int],
              device: torch.device | str = "cpu") -> BacktestResult:
        """The greedy policy of ``act_values`` (:func:`greedy_policy`) over ``window`` of ``features``, under the
        run's ISV as it is now (trade plans, when the run has them, work as in training)."""
        isv = {} if self.isv is None else {"isv": self.isv.tensor, "layout": self.isv.layout}
        return backtest(greedy_policy(act_values, device), self.prices, features, self.instrument, self.env,
                        window=window, step_kernel=self.step_kernel, **isv)

    def baselines(self, features: np.ndarray, window: tuple[int, int]) -> dict[str, BacktestResult]:
        """Buy-and-hold and flat over ``window`` (:func:`foxhunt.env.backtest.baselines`: with trade plans, no plan
        opens for them, so buy-and-hold stays bought)."""
        isv = {} if self.isv is None else {"isv": self.isv.tensor, "layout": self.isv.layout}
        return baselines(self.prices, features, self.instrument, self.env, window=window, step_kernel=self.step_kernel,
                         **isv)


def metrics_of(result: BacktestResult) -> dict[str, float]:
    """The metric values of a result (no equity curve), JSON-ready; ``bankrupt_bar`` only when it went bankrupt,
    ``margin_calls`` and ``first_margin_call_bar`` only when the margin cut a position, ``plan_stops``,
    ``plan_targets`` and ``plan_expiries`` only with trade plans.

    Every value stays a number (a resume checkpoint's reader holds the stored figures to that), so a solvent
    result has no ``bankrupt_bar`` key rather than a null one.
    """
    values = {key: _finite(getattr(result, key)) for key in METRIC_KEYS}
    if result.bankrupt_bar is not None:
        values["bankrupt_bar"] = result.bankrupt_bar
    if result.margin_calls:
        values["margin_calls"] = result.margin_calls
        values["first_margin_call_bar"] = result.first_margin_call_bar
    if result.plan_exits is not None:  # a run with trade plans: how many positions each kind of exit closed
        for key in PLAN_EXIT_KEYS:
            values[key] = result.plan_exits[key.removeprefix("plan_")]
    return values


def _finite(value: float) -> float:
    # JSON has no infinity; an unbounded ratio (a positive mean with no downside at all) is capped.
    value = float(value)
    return value if math.isfinite(value) else (1e9 if value > 0 else -1e9)


def better(metric: str, candidate: float, incumbent: float | None) -> bool:
    """Whether ``candidate`` beats ``incumbent`` on ``metric`` (lower drawdown is better)."""
    if incumbent is None:
        return True
    return candidate < incumbent if metric == "max_drawdown" else candidate > incumbent


def combine(curves: Sequence[np.ndarray], fills: Sequence[int], round_trips: Sequence[int], turnovers: Sequence[float],
            bars_per_year: float) -> dict[str, float]:
    """Overall metrics of consecutive windows: each fold's equity restarts from the same cash, so the windows
    are chained through their per-bar returns into one curve, and Sharpe, Sortino and drawdown are those of
    that curve (never an average of per-fold ratios). Net P&L, turnover, fills and round trips are sums over
    the folds."""
    returns = np.concatenate([curve[1:] / curve[:-1] - 1.0 for curve in curves]) if curves else np.zeros(0)
    chained = np.cumprod(np.concatenate([[1.0], 1.0 + returns]))
    sharpe, sortino, max_drawdown = equity_ratios(chained, bars_per_year)
    return {
        "net_pnl": float(sum(curve[-1] - curve[0] for curve in curves)),
        "sharpe": sharpe,
        "sortino": _finite(sortino),
        "max_drawdown": max_drawdown,
        "turnover": float(sum(turnovers)),
        "fills": int(sum(fills)),
        "round_trips": int(sum(round_trips)),
    }


def overall(results: Sequence[dict[str, Any]], window: str, bars_per_year: float) -> dict[str, dict[str, Any]]:
    """Every policy's :func:`combine` over the folds' ``window`` ("validation" or "test") curves.

    Each result holds ``result[window][policy]`` metrics and ``result["curves"][window][policy]`` equity.
    With trade plans, each kind of plan exit is summed over the folds too (``PLAN_EXIT_KEYS``).
    A policy whose account went bankrupt in some folds gets ``bankrupt_folds``, the list of those folds.
    A fold result from before ``fills`` existed (``trades`` held its round trips) is read as such, and leaves
    the overall without ``fills``. Test windows follow each other exactly; validation windows do too when
    ``validation_bars`` equals ``test_bars``, and overlap (sharing bars) when it is larger, so ``validation_overall`` is a description
    of the selection windows, not a market stretch traded once.
    """
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
    figures = {}
    for policy in POLICIES:
        counted = [r[window][policy] for r in results]
        figures[policy] = combine(
            [np.asarray(r["curves"][window][policy], dtype=np.float64) for r in results],
            [metrics.get("fills", 0) for metrics in counted],
            [metrics.get("round_trips", metrics.get("trades", 0)) for metrics in counted],
            [metrics["turnover"] for metrics in counted],
            bars_per_year,
        )
        if any("fills" not in metrics for metrics in counted):
            # A fold finished by a foxhunt that counted round trips only (as ``trades``), read back from the resume
            # checkpoint of a run stopped before the upgrade: its fills are unknown, so no overall count is given.
            del figures[policy]["fills"]
        # A fold whose account went bankrupt is named here too: its ruin is inside the chained figures,
        # and a reader of the overall line alone should not have to find it in the folds.
        for key in PLAN_EXIT_KEYS:  # a run with trade plans: the exits of every fold, summed
            if counted and all(key in metrics for metrics in counted):
                figures[policy][key] = int(sum(metrics[key] for metrics in counted))
        ruined = [r.get("fold", index) for index, r in enumerate(results) if "bankrupt_bar" in r[window][policy]]
        if ruined:
            figures[policy]["bankrupt_folds"] = ruined
    return figures


def run_summary(source: str, data_hash: str, seed: int, validation_metric: str, results: Sequence[dict[str, Any]],
                bars_per_year: float) -> dict[str, Any]:
    """A run's ``summary.json``: test figures are its result (``overall``); validation figures are kept apart,
    labelled as such. ``results`` are the finished folds' (each fold's curves are chained, not written)."""
    folds = [{k: v for k, v in r.items() if k != "curves"} for r in results]
    return {
        "data": source,
        "data_hash": data_hash,
        "seed": seed,
        "validation_metric": validation_metric,
        "folds": folds,
        # no fold finished (a run stopped by a numerical fault in its first fold): nothing to chain
        "overall": overall(results, "test", bars_per_year) if results else {},
        "validation_overall": overall(results, "validation", bars_per_year) if results else {},
    }
