"""The suite's oracle: a causal threshold policy on each model, traded through the environment's physics.

The physics run is checked against a float64 recomputation of the same
positions; causality by perturbing every bar after a decision; the random walk
by the oracle never trading; the AR(1) strengths by the ordering of their Sharpes.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.actions import Branch, Direction, OrderType, Urgency
from foxhunt.data import LEARNING_SUITE, OHLCV, load
from foxhunt.env.oracle import oracle_backtest, oracle_policy, oracle_targets
from foxhunt.env.oracle import calibrate, oracle_orders, order_cost_per_contract, relative_cost, threshold_targets
from foxhunt.data.synthetic import parse_spec
from foxhunt.env.config import EnvConfig
from foxhunt.errors import DataError

ONE_CONTRACT = EnvConfig(max_contracts=1)  # cap 1 whatever Kelly says (kelly_min_contracts = 1), margin allows 25


def recomputed_equity(market, targets: np.ndarray, start: int, config: EnvConfig) -> np.ndarray:
    """docs/fill-model.md in float64 for one contract: a decision at bar t fills at open[t+1], marked at close[t+1]."""
    instrument = market.instrument
    per_contract = order_cost_per_contract(instrument, config)
    open_, close = market.ohlcv[:, OHLCV.OPEN], market.ohlcv[:, OHLCV.CLOSE]
    equity, position = [config.initial_cash], 0.0
    for i, target in enumerate(targets[:-1]):
        t = start + i
        filled = target - position
        gross = (position * (close[t + 1] - close[t]) + filled * (close[t + 1] - open_[t + 1])) * instrument.multiplier
        equity.append(equity[-1] + gross - abs(filled) * per_contract)
        position = target
    return np.array(equity)


@pytest.mark.parametrize("source", ["synthetic:ar1?phi=0.3&bars=400&seed=2", "synthetic:meanrev?kappa=0.05&bars=400&seed=2"])
def test_physics_equity_equals_a_float64_recomputation_of_the_same_positions(source):
    market = load(source)
    window = (100, 400)
    targets = oracle_targets(market, ONE_CONTRACT, window)
    result = oracle_backtest(market, ONE_CONTRACT, window)
    assert np.count_nonzero(np.diff(targets)) >= 5  # the oracle really trades here
    np.testing.assert_allclose(result.equity, recomputed_equity(market, targets, window[0], ONE_CONTRACT), rtol=1e-12)
    assert result.turnover > 0 and result.fills >= result.round_trips > 0


def test_orders_are_full_passive_market_orders_on_a_change_and_hold_otherwise():
    actions = oracle_orders(np.array([0.0, 1.0, 1.0, -1.0, 0.0, 0.0]))
    assert actions[:, Branch.DIRECTION].tolist() == [
        Direction.HOLD, Direction.LONG, Direction.HOLD, Direction.SHORT, Direction.FLAT, Direction.HOLD
    ]
    assert (actions[:, Branch.ORDER_TYPE] == OrderType.MARKET).all() and (actions[:, Branch.URGENCY] == Urgency.PASSIVE).all()


def test_threshold_targets_trade_only_beyond_the_cost_band():
    mean = np.array([0.5, 2.5, 1.0, -1.0, -3.0, 0.0])
    cost = np.ones(6)
    assert threshold_targets(mean, cost, 2.0, True, 0.0).tolist() == [0, 1, 1, 1, -1, -1]
    assert threshold_targets(mean, cost, 2.0, False, 0.0).tolist() == [0, 1, 0, 0, -1, 0]


@settings(max_examples=25, deadline=None)
@given(cut=st.integers(50, 298), kind=st.sampled_from(["ar1", "meanrev", "trend"]))
def test_no_decision_uses_a_later_bar(cut, kind):
    market = load(f"synthetic:{kind}?bars=300&seed=4")
    ohlcv = market.ohlcv.copy()
    ohlcv[cut + 1:, [OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW, OHLCV.CLOSE]] *= 1.02  # every later bar moves
    perturbed = attrs.evolve(market, ohlcv=ohlcv)
    window = (40, 300)
    before, after = oracle_targets(market, EnvConfig(), window), oracle_targets(perturbed, EnvConfig(), window)
    np.testing.assert_array_equal(before[: cut + 1 - window[0]], after[: cut + 1 - window[0]])


def test_random_walk_oracle_stays_flat():
    market = load("synthetic:randomwalk?bars=1500&seed=9")
    result = oracle_backtest(market, EnvConfig(), (500, 1500))
    assert result.fills == result.round_trips == 0 and result.turnover == 0.0 and result.sharpe == 0.0 and result.exposure == 0.0
    np.testing.assert_array_equal(result.equity, np.full(1000, EnvConfig().initial_cash))


def test_oracle_sharpe_after_costs_is_positive_and_grows_with_ar1_strength():
    sharpes = []
    for phi in (0.1, 0.2, 0.3):
        market = load(f"synthetic:ar1?phi={phi}&bars=4500&seed=3")
        sharpes.append(oracle_backtest(market, EnvConfig(), (500, 4500)).sharpe)
    # 4,000 hourly bars: an annualised Sharpe has a sampling error of about 1.5; the levels are about 7 apart.
    assert 2.5 < sharpes[0] < sharpes[1] < sharpes[2], sharpes


def test_calibration_is_per_model_and_cost_not_per_market():
    a, b = load("synthetic:ar1?phi=0.2&bars=300&seed=1"), load("synthetic:ar1?phi=0.2&bars=900&seed=2")
    assert oracle_policy(a, EnvConfig()) == oracle_policy(b, EnvConfig())
    cheap, dear = EnvConfig(commission=0.0, slippage_ticks=0.0), EnvConfig(commission=40.0)
    assert oracle_policy(a, cheap).calibration_sharpe > oracle_policy(a, dear).calibration_sharpe
    spec, instrument = parse_spec(a.source), a.instrument
    assert calibrate(spec, instrument, EnvConfig()).calibration_sharpe > 0


def test_cost_is_a_passive_market_order_relative_to_the_close():
    market = load("synthetic:ar1?bars=10")
    per_contract = (0.5 * 1e-5 + 0.5 * 1e-5 * 0.5) * 100_000 + 2.0  # half spread, PASSIVE slippage, commission
    assert order_cost_per_contract(market.instrument, EnvConfig()) == pytest.approx(per_contract)
    np.testing.assert_allclose(relative_cost(market.close, market.instrument, EnvConfig()), per_contract / (market.close * 1e5))


def test_oracle_needs_a_synthetic_market_and_a_real_window():
    market = load("synthetic:ar1?bars=50")
    with pytest.raises(DataError, match="not a synthetic market"):
        oracle_targets(attrs.evolve(market, source="prices.csv"))
    with pytest.raises(ValueError, match="at least two"):
        oracle_backtest(market, EnvConfig(), (49, 60))


def test_every_suite_signal_market_has_a_profitable_oracle_and_the_random_walk_none():
    for name, source in LEARNING_SUITE.items():
        policy = oracle_policy(load(source.replace("bars=5000", "bars=100")), EnvConfig())
        if name == "randomwalk":
            assert policy.calibration_sharpe == 0.0
        else:
            assert policy.calibration_sharpe > 4.0, (name, policy)  # clear of a 1,500-bar window's sampling error


def test_actions_backtest_replays_the_oracle_and_refuses_rows_that_miss_the_window() -> None:
    from foxhunt.env.oracle import actions_backtest

    market = load("synthetic:ar1?phi=0.2&bars=600&seed=4")
    config = EnvConfig()
    window = (100, 400)
    actions = oracle_orders(oracle_targets(market, config, window))
    assert actions_backtest(market, actions, config, window).sharpe == oracle_backtest(market, config, window).sharpe
    with pytest.raises(ValueError, match="299 rows of actions for the window's 300 bars"):
        actions_backtest(market, actions[:-1], config, window)
