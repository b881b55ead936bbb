"""Backtest metrics: buy-and-hold from the raw prices, flat is zero, metric definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from env_builders import TEST_INSTRUMENT, synthetic_market

from structlog.testing import capture_logs

from foxhunt.actions import Branch, Direction
from foxhunt.data.instrument import preset
from foxhunt.env import PS, BacktestResult, EnvConfig, backtest, backtest_with_baselines, constant_policy
from foxhunt.env.backtest import METRIC_KEYS, margin_call_steps, result_from_history
from foxhunt.trainer.evaluation import metrics_of

WINDOW = (40, 180)


def test_buy_and_hold_equals_a_direct_computation_from_prices() -> None:
    prices, features = synthetic_market(7, bars=200)
    config = EnvConfig(slippage_ticks=1.0)
    report = backtest_with_baselines(constant_policy(Direction.SHORT), prices, features, TEST_INSTRUMENT, config, window=WINDOW)
    start, end = WINDOW
    tick = TEST_INSTRUMENT.tick_size
    fill = prices[start + 1, 0] + 0.5 * tick + 1.0 * tick  # next open + half spread + NORMAL slippage
    closes = prices[start + 1 : end, 3]
    equity = np.r_[config.initial_cash, config.initial_cash + (closes - fill) * TEST_INSTRUMENT.multiplier - TEST_INSTRUMENT.commission]
    bh = report.buy_and_hold
    np.testing.assert_allclose(bh.equity, equity, rtol=1e-12)
    assert bh.net_pnl == pytest.approx(equity[-1] - equity[0])
    returns = equity[1:] / equity[:-1] - 1
    assert bh.sharpe == pytest.approx(returns.mean() / returns.std(ddof=1) * math.sqrt(252.0))
    peak = np.maximum.accumulate(equity)
    assert bh.max_drawdown == pytest.approx(((peak - equity) / peak).max())
    # One fill (the entry) and no round trip: the position is never closed, yet the turnover is a contract's notional
    assert bh.exposure == 1.0 and bh.fills == 1 and bh.round_trips == 0
    assert bh.turnover == pytest.approx(prices[start + 1, 0] * TEST_INSTRUMENT.multiplier / config.initial_cash)


def test_flat_has_zero_pnl_and_the_agent_result_is_complete() -> None:
    prices, features = synthetic_market(8, bars=200)
    report = backtest_with_baselines(constant_policy(Direction.LONG), prices, features, TEST_INSTRUMENT, EnvConfig(), window=WINDOW)
    flat = report.flat
    assert flat.net_pnl == 0 and flat.fills == flat.round_trips == 0 and flat.exposure == 0 and flat.turnover == 0
    assert np.all(flat.equity == EnvConfig().initial_cash) and flat.sharpe == 0 and flat.max_drawdown == 0
    values = report.to_dict()
    for name in ("agent", "buy_and_hold", "flat"):
        assert set(values[name]) == set(METRIC_KEYS) | {"equity", "bankrupt_bar", "margin_calls", "first_margin_call_bar"}
        assert values[name]["bankrupt_bar"] is None
        assert len(values[name]["equity"]) == WINDOW[1] - WINDOW[0]


def test_a_trading_policy_counts_round_trips() -> None:
    prices, features = synthetic_market(9, bars=200)
    flip = {"long": True}

    def alternate(obs: torch.Tensor) -> torch.Tensor:
        flip["long"] = not flip["long"]
        action = torch.zeros((1, Branch.size()), dtype=torch.int64)
        action[0, Branch.DIRECTION] = Direction.LONG if flip["long"] else Direction.FLAT
        return action

    result = backtest(alternate, prices, features, TEST_INSTRUMENT, EnvConfig(), window=WINDOW)
    steps = WINDOW[1] - WINDOW[0] - 1
    # FLAT (already flat: no order), LONG, FLAT, ...: every later bar fills, every second fill closes a round trip
    assert result.fills == steps - 1 and result.round_trips == steps // 2 and 0 <= result.hit_rate <= 1
    assert result.exposure == pytest.approx((steps // 2) / steps)  # long after every second bar


def test_metric_definitions_on_a_known_curve() -> None:
    history = np.zeros((4, PS.size()))
    history[:, PS.EQUITY] = [110.0, 99.0, 121.0, 121.0]
    history[:, PS.POSITION] = [1, 1, 0, 0]
    history[:, PS.FILL_QTY] = [1, 0, -1, 0]
    history[-1, PS.TRADES], history[-1, PS.WINS], history[-1, PS.TURNOVER] = 2, 1, 300.0
    result = result_from_history(history, 100.0, bars_per_year=4.0)
    returns = np.array([0.1, -0.1, 121 / 99 - 1, 0.0])
    assert isinstance(result, BacktestResult)
    assert result.net_pnl == pytest.approx(21.0)
    assert result.sharpe == pytest.approx(returns.mean() / returns.std(ddof=1) * 2.0)
    assert result.sortino == pytest.approx(returns.mean() / math.sqrt(0.01 / 4) * 2.0)
    assert result.max_drawdown == pytest.approx(0.1)
    assert result.calmar == pytest.approx((1.21 ** (4.0 / 4) - 1) / 0.1)
    assert (result.turnover, result.fills, result.round_trips, result.hit_rate, result.exposure) == (3.0, 2, 2, 0.5, 0.5)


def test_prices_times_1e12_on_the_zero_margin_equity_preset_stop_at_bankruptcy_and_say_so() -> None:
    """The issue's case: no margin limits the position, one bar's move ruins 100k of cash. The backtest asks the
    policy for nothing after that bar, holds the ruined equity to the window's end, and names the bar."""
    prices, features = synthetic_market(11, bars=200)
    prices = prices * 1e12
    equity_preset = preset("EQUITY")
    assert equity_preset.initial_margin == 0.0
    calls = []

    def long(obs: torch.Tensor) -> torch.Tensor:
        calls.append(len(calls))
        return constant_policy(Direction.LONG)(obs)

    with capture_logs() as logs:
        result = backtest(long, prices, features, equity_preset, EnvConfig(), window=WINDOW)
    start, end = WINDOW
    ruin = int(np.flatnonzero(result.equity <= 0)[0])  # equity[i] is the portfolio after bar start + i
    assert result.bankrupt_bar == start + ruin
    assert len(calls) == ruin  # one decision per bar up to the ruinous one, none after
    assert len(result.equity) == end - start and np.all(result.equity[ruin:] == result.equity[ruin])
    assert result.net_pnl == result.equity[ruin] - EnvConfig().initial_cash < -EnvConfig().initial_cash
    assert metrics_of(result)["bankrupt_bar"] == start + ruin
    assert result.fills == 1  # the entry; the held rows after the ruin repeat the last step, not counted again
    assert result.to_dict()["bankrupt_bar"] == start + ruin
    (event,) = [entry for entry in logs if entry["event"] == "backtest_bankrupt"]
    assert event["bar"] == start + ruin and event["log_level"] == "warning"


def test_a_solvent_account_has_no_bankrupt_bar() -> None:
    prices, features = synthetic_market(11, bars=200)
    result = backtest(constant_policy(Direction.LONG), prices, features, TEST_INSTRUMENT, EnvConfig(), window=WINDOW)
    assert result.bankrupt_bar is None and "bankrupt_bar" not in metrics_of(result)
    assert np.all(result.equity > 0)


def test_margin_call_steps_on_a_hand_made_history() -> None:
    # 10,000 of margin a contract at a 0.5 margin fraction: equity e allows floor(e / 20,000) contracts.
    history = np.zeros((6, PS.size()))
    rows = [(5, 100_000.0), (5, 80_000.0), (4, 80_000.0), (4, -10.0), (0, -10.0), (0, -10.0)]
    for step, (position, equity) in enumerate(rows):
        history[step, PS.POSITION], history[step, PS.EQUITY], history[step, PS.BAR] = position, equity, 10 + step
    # step t starts from row t - 1: 5 held on 80,000 (4 allowed) at step 2, 4 held on -10 (0 allowed) at step 4
    np.testing.assert_array_equal(margin_call_steps(history, 100_000.0, 10_000.0, 0.5), [2, 4])
    result = result_from_history(history, 100_000.0, 252.0, initial_margin=10_000.0, margin_fraction=0.5)
    assert (result.margin_calls, result.first_margin_call_bar) == (2, 12)
    assert margin_call_steps(history, 100_000.0, 0.0, 0.5).size == 0  # no initial margin: no calls


def _trending_market(step: float, bars: int = 120) -> tuple[np.ndarray, np.ndarray]:
    close = 4000.0 * step ** np.arange(bars)
    open_ = np.r_[close[0], close[:-1]]
    prices = np.stack([open_, np.maximum(open_, close) + 1.0, np.minimum(open_, close) - 1.0, close], axis=1)
    return prices, np.random.default_rng(0).normal(size=(bars, 3)).astype(np.float32)


def test_a_long_position_in_a_falling_market_is_cut_by_the_margin_and_the_backtest_says_so() -> None:
    es = preset("ES")  # 12,650 of initial margin a contract; 100,000 at 0.5 allows 3 contracts at the start
    prices, features = _trending_market(0.99)
    with capture_logs() as logs:
        result = backtest(constant_policy(Direction.LONG), prices, features, es, EnvConfig(), window=(10, 110))
    assert result.margin_calls >= 1 and 10 < result.first_margin_call_bar < 110
    figures = metrics_of(result)
    assert figures["margin_calls"] == result.margin_calls
    assert figures["first_margin_call_bar"] == result.first_margin_call_bar
    (event,) = [entry for entry in logs if entry["event"] == "backtest_margin_call"]
    assert event["first_bar"] == result.first_margin_call_bar and event["log_level"] == "warning"
    rising = backtest(constant_policy(Direction.LONG), *_trending_market(1.002), es, EnvConfig(), window=(10, 110))
    assert rising.margin_calls == 0 and "margin_calls" not in metrics_of(rising)
