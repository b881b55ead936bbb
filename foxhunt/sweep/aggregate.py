"""The sweep's figures: each test metric over trials, with its spread and a bootstrap confidence interval.

A trial's figures are its ``summary.json`` ``overall`` test figures: the agent's,
buy-and-hold's and flat's on the one fold it trained. Per variant and metric,
three series are described over the variant's complete trials (seeds x folds):

- ``agent``: the agent's figure;
- ``minus_buy_and_hold``: agent minus buy-and-hold on the same window (the paired difference);
- ``minus_flat``: agent minus flat (flat never trades, so its figures are 0; taken from the summary all the same).

Each is described by :func:`describe`: count, mean, sample standard deviation
(n - 1), quartiles and interquartile range (numpy's linear percentiles), and a
95% percentile-bootstrap interval of the mean: ``resamples`` resamples of the
trials with replacement, drawn by ``numpy.random.default_rng(seed)``, so the same
trials always give the same interval. An interval that excludes 0 for
``minus_buy_and_hold`` says the difference is unlikely to be noise of this many
trials; trials of one seed share a market path, so it is not a proof.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["METRICS", "SERIES", "BOOTSTRAP_SEED", "BOOTSTRAP_RESAMPLES", "describe", "bootstrap_ci", "aggregate"]

# The test metrics of summary.json, in the order tables show them.
METRICS = ("sharpe", "net_pnl", "sortino", "max_drawdown", "turnover", "fills", "round_trips")
SERIES = ("agent", "minus_buy_and_hold", "minus_flat")
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000


def bootstrap_ci(values: Sequence[float], *, seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES,
                 level: float = 0.95) -> tuple[float, float]:
    """The percentile-bootstrap ``level`` interval of the mean of ``values`` (deterministic for a given seed)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("a bootstrap interval needs at least one value")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(low), float(high)


def describe(values: Sequence[float], *, seed: int = BOOTSTRAP_SEED,
             resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, float | int | None]:
    """Count, mean, std (n - 1; None for one value), quartiles, IQR and the bootstrap 95% interval of the mean."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return {"n": 0}
    q25, median, q75 = (float(q) for q in np.percentile(data, [25, 50, 75]))
    low, high = bootstrap_ci(data, seed=seed, resamples=resamples)
    return {
        "n": int(data.size),
        "mean": float(data.mean()),
        "std": float(data.std(ddof=1)) if data.size > 1 else None,
        "q25": q25,
        "median": median,
        "q75": q75,
        "iqr": q75 - q25,
        "ci95": [low, high],
    }


def _figure(figures: Mapping[str, Any], metric: str) -> float | None:
    value = figures.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def aggregate(overall: Sequence[Mapping[str, Any]], *, seed: int = BOOTSTRAP_SEED,
              resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, dict[str, Any]]:
    """Per metric, the three series of ``overall`` (each a trial's ``summary.json`` ``overall``) described.

    A trial without a finite figure for a metric (an older summary without fill counts) is left out of that
    metric's series only, so ``n`` may differ between metrics.
    """
    result: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        series: dict[str, list[float]] = {name: [] for name in SERIES}
        for figures in overall:
            agent = _figure(figures.get("agent", {}), metric)
            if agent is None:
                continue
            series["agent"].append(agent)
            hold = _figure(figures.get("buy_and_hold", {}), metric)
            if hold is not None:
                series["minus_buy_and_hold"].append(agent - hold)
            flat = _figure(figures.get("flat", {}), metric)
            series["minus_flat"].append(agent - (flat if flat is not None else 0.0))
        result[metric] = {name: describe(values, seed=seed, resamples=resamples) for name, values in series.items()}
    return result
