"""MarketData invariants, the gap rule, and DataConfig validation."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.data import BOOK_LEVELS, LEVEL, OHLCV, DataConfig, MarketData, load, preset
from foxhunt.data.validate import bar_frequency, find_gaps

HOUR = np.timedelta64(1, "h")


def bars(n: int) -> np.ndarray:
    ohlcv = np.ones((n, OHLCV.size()))
    ohlcv[:, OHLCV.HIGH] = 1.1
    ohlcv[:, OHLCV.LOW] = 0.9
    return ohlcv


def test_arrays_are_private_and_read_only():
    ohlcv = bars(3)
    stamps = np.array(["2020-01-01", "2020-01-02", "2020-01-03"], "datetime64[ns]")
    market = MarketData("test", stamps, ohlcv, preset("EQUITY"))
    first_bar = 0
    ohlcv[first_bar, OHLCV.CLOSE] = 5.0
    assert market.close[first_bar] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        market.ohlcv[first_bar, OHLCV.CLOSE] = 2.0
    with pytest.raises(ValueError, match="read-only"):
        market.timestamps[0] = stamps[1]
    with pytest.raises(ValueError, match="strictly increasing"):
        MarketData("test", stamps[::-1], ohlcv, preset("EQUITY"))
    with pytest.raises(ValueError, match="shape"):
        MarketData("test", stamps, ohlcv[:, :4], preset("EQUITY"))


def test_slice_and_content_hash():
    market = load("eurusd-1h-2017")
    part = market.slice(100, 200)
    assert len(part) == 100 and part.timestamps[0] == market.timestamps[100]
    assert part.content_hash() == market.slice(100, 200).content_hash()
    assert part.content_hash() != market.slice(100, 201).content_hash()
    assert market.content_hash() == load("eurusd-1h-2017").content_hash()
    other_instrument = attrs.evolve(market, instrument=preset("6E"))
    assert other_instrument.content_hash() != market.content_hash()
    december = market.slice(6000, len(market))
    assert [g.after for g in december.report.gaps] == [6128 - 6000]
    with pytest.raises(ValueError, match="outside"):
        market.slice(10, 5)


def test_content_hash_is_a_pinned_value():
    # Pinned so that an accidental change of the hash encoding (which orphans every cache) is seen.
    stamps = np.array(["2020-01-01", "2020-01-02", "2020-01-03"], "datetime64[ns]")
    market = MarketData("anywhere", stamps, bars(3), preset("EQUITY"))
    assert market.content_hash() == PINNED_HASH
    assert MarketData("elsewhere", stamps, bars(3), preset("EQUITY")).content_hash() == PINNED_HASH


PINNED_HASH = "18a5e7367b4d4539470310dd0a96427b436cc5e7bb7df7269e90be731b5302c1"


def test_book_levels_are_checked_sliced_and_hashed():
    stamps = np.array(["2020-01-01", "2020-01-02", "2020-01-03"], "datetime64[ns]")
    levels = np.arange(3 * BOOK_LEVELS * LEVEL.size(), dtype=float).reshape(3, BOOK_LEVELS, LEVEL.size())
    market = MarketData("anywhere", stamps, bars(3), preset("EQUITY"), levels=levels)
    np.testing.assert_array_equal(market.slice(1, 3).levels, levels[1:])
    assert not market.levels.flags.writeable
    assert market.content_hash() != PINNED_HASH  # the levels count; a market without them keeps its pinned hash
    with pytest.raises(ValueError, match=r"levels must have shape \[bars=3, 10, LEVEL=4\]"):
        MarketData("anywhere", stamps, bars(3), preset("EQUITY"), levels=levels[:, :5])


def hourly(start: str, hours: list[int]) -> np.ndarray:
    return np.datetime64(start, "ns") + np.array(hours) * HOUR


def test_fx_weekend_is_a_closure_not_a_gap():
    # Friday 2017-01-06 19:00..21:00, then Sunday 22:00 (49 hours later) onwards.
    stamps = hourly("2017-01-06T19:00", [0, 1, 2, 51, 52, 53])
    scan = find_gaps(stamps)
    assert scan.gaps == () and scan.closures == 1
    # A 60-hour weekend is 10 hours more than any FX weekend: reported.
    stamps = hourly("2017-01-06T19:00", [0, 1, 2, 62, 63, 64])
    (gap,) = find_gaps(stamps).gaps
    assert gap.missing_bars == 59 - 50


def test_daily_holidays_and_longer_closures():
    days = np.array(["2018-12-20", "2018-12-21", "2018-12-24", "2018-12-26", "2018-12-27", "2019-01-02"], "datetime64[ns]")
    scan = find_gaps(days)
    assert scan.closures == 1  # Christmas Day: one missing weekday
    assert [(g.after, g.missing_bars) for g in scan.gaps] == [(4, 3)]  # 28th, 31st and 1 Jan: three weekdays
    seven_day = np.arange(np.datetime64("2020-01-01", "ns"), np.datetime64("2020-03-01", "ns"), np.timedelta64(1, "D"))
    seven_day = np.delete(seven_day, [10, 11])  # a crypto-style calendar: weekends are bars, so missing days count
    assert [g.missing_bars for g in find_gaps(seven_day).gaps] == [2]


@given(st.lists(st.integers(1, 5), min_size=3, max_size=60))
def test_intraday_missing_bars_add_up(steps):
    stamps = np.datetime64("2021-03-01T00:00", "ns") + np.cumsum([0, *steps]) * np.timedelta64(1, "m")
    scan = find_gaps(stamps)
    spacing = int(np.quantile(np.diff(stamps).astype(np.int64), 0.5, method="lower"))
    expected = sum(round(s * 60e9 / spacing) - 1 for s in steps if round(s * 60e9 / spacing) > 1)
    assert sum(g.missing_bars for g in scan.gaps) == expected


def test_bar_frequency_names():
    assert bar_frequency(hourly("2020-01-01", [0, 1, 2])) == "1h"
    assert bar_frequency(np.datetime64("2020-01-01", "ns") + np.arange(3) * np.timedelta64(5, "m")) == "5m"


def test_data_config_validation():
    assert DataConfig().source == "eurusd-1h-2017"
    with pytest.raises(ValueError, match="not a preset"):
        DataConfig(instrument="ZZ")
    with pytest.raises(ValueError, match="IANA"):
        DataConfig(timezone="Nowhere/Town")
    with pytest.raises(ValueError, match="unknown role"):
        DataConfig(columns={"price": "Close"})
    with pytest.raises(ValueError):
        DataConfig(duplicates="keep_first")
    assert DataConfig(instrument="es", columns={"volume": None}).instrument == "es"
