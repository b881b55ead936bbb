"""Buy-and-hold on both bundled real datasets, through the environment's physics, equals the value
computed independently from the raw CSV text (next-bar open fill against us, then marked at each close)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np
import pytest

from foxhunt.actions import Direction, Urgency
from foxhunt.data import load
from foxhunt.data.catalog import bundled_path
from foxhunt.env.backtest import backtest, constant_policy
from foxhunt.env.config import EnvConfig

CASES = ["eurusd-1h-2017", "sp500-1d-1999-2018"]


def raw_open_close(name: str) -> tuple[np.ndarray, np.ndarray]:
    path = Path(bundled_path(name))
    with gzip.open(path, "rt", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return np.array([float(r["Open"]) for r in rows]), np.array([float(r["Close"]) for r in rows])


@pytest.mark.parametrize("name", CASES)
def test_buy_and_hold_on_real_data_matches_the_raw_prices(name):
    market = load(name)
    opens, closes = raw_open_close(name)
    assert len(opens) == len(market)
    spec = market.instrument
    config = EnvConfig(max_contracts=1, kelly_min_contracts=1, initial_cash=1_000_000.0)
    result = backtest(constant_policy(Direction.LONG), market.ohlcv, np.zeros((len(market), 1)), spec, config)
    slippage_ticks = config.slippage_ticks * config.slippage_by_urgency[Urgency.NORMAL]  # market order
    fill = opens[1] + (0.5 * spec.spread_ticks + slippage_ticks) * spec.tick_size
    expected = config.initial_cash + (closes[1:] - fill) * spec.multiplier - spec.commission
    np.testing.assert_allclose(result.equity[1:], expected, rtol=1e-12)
    assert result.net_pnl == pytest.approx(expected[-1] - config.initial_cash, rel=1e-12)
    assert result.exposure == 1.0
