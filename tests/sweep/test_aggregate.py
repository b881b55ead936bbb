"""The sweep's statistics against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foxhunt.sweep.aggregate import METRICS, aggregate, bootstrap_ci, describe


def test_describe_gives_mean_sample_std_quartiles_and_iqr_exactly() -> None:
    stats = describe([4.0, 1.0, 3.0, 2.0])
    assert stats["n"] == 4
    assert stats["mean"] == 2.5
    # sample std: squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, over n - 1 = 3
    assert stats["std"] == pytest.approx(math.sqrt(5 / 3), rel=1e-12)
    # linear percentiles of 1, 2, 3, 4: position 0.75 -> 1.75, position 2.25 -> 3.25
    assert (stats["q25"], stats["median"], stats["q75"]) == (1.75, 2.5, 3.25)
    assert stats["iqr"] == 1.5


def test_one_value_has_no_spread_and_a_point_interval() -> None:
    stats = describe([0.7])
    assert stats["std"] is None and stats["iqr"] == 0.0
    assert stats["ci95"] == [0.7, 0.7]
    assert describe([]) == {"n": 0}


def test_bootstrap_interval_contains_the_mean_and_is_reproducible() -> None:
    values = [0.3, -1.2, 2.5, 0.9, 1.4, -0.4, 0.1, 1.8]
    low, high = bootstrap_ci(values)
    assert low < float(np.mean(values)) < high
    assert bootstrap_ci(values) == (low, high)  # the same seed: the same interval, bit for bit
    assert bootstrap_ci(values, seed=1) != (low, high)  # another seed draws other resamples
    # the interval of a mean is narrower than the data's own range
    assert min(values) < low and high < max(values)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)


def test_bootstrap_interval_is_the_percentiles_of_resampled_means() -> None:
    values = np.array([1.0, 5.0, 2.0])
    rng = np.random.default_rng(7)
    means = values[rng.integers(0, 3, size=(500, 3))].mean(axis=1)
    expected = tuple(float(q) for q in np.percentile(means, [2.5, 97.5]))
    assert bootstrap_ci(values, seed=7, resamples=500) == expected


def figures(agent: float, hold: float, flat: float = 0.0) -> dict:
    def row(value: float) -> dict:
        return {metric: value for metric in METRICS}

    return {"agent": row(agent), "buy_and_hold": row(hold), "flat": row(flat)}


def test_aggregate_describes_agent_and_its_paired_differences_to_buy_and_hold_and_flat() -> None:
    result = aggregate([figures(1.0, 0.5), figures(2.0, 3.0), figures(-1.0, -2.0)])
    sharpe = result["sharpe"]
    assert sharpe["agent"]["mean"] == pytest.approx(2.0 / 3.0)
    # paired differences: 0.5, -1.0, 1.0
    assert sharpe["minus_buy_and_hold"]["mean"] == pytest.approx(0.5 / 3.0)
    assert sharpe["minus_buy_and_hold"]["median"] == 0.5
    assert sharpe["minus_flat"]["mean"] == pytest.approx(2.0 / 3.0)  # flat is 0
    assert set(result) == set(METRICS)


def test_aggregate_leaves_a_trial_without_a_finite_figure_out_of_that_metric_only() -> None:
    old = figures(1.0, 0.0)
    del old["agent"]["fills"]  # a summary written before fills were counted
    nan = figures(float("nan"), 0.0)
    result = aggregate([old, figures(3.0, 1.0), nan])
    assert result["fills"]["agent"]["n"] == 1
    assert result["sharpe"]["agent"]["n"] == 2 and result["sharpe"]["agent"]["mean"] == 2.0
