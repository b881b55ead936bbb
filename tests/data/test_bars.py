"""Volume bars (``[data] bars = "volume"``) against a pure-python reference, on random series, the bundled data
and a CSV; the settings' errors name their key; the default (time bars) is the source's own bars."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.config import load_config
from foxhunt.data import BOOK, FLOW, OHLCV, DataConfig, Gap, InstrumentSpec, MarketData, load, load_from_config
from foxhunt.data.bars import volume_bars
from foxhunt.data.market import DataReport
from foxhunt.errors import ConfigError, DataError
from market_builders import with_book

SPEC = InstrumentSpec("TEST", 0.01, 1.0, 0.0, 0.0, 0.0, bars_per_year=1000.0)


def reference(rows: list[list[float]], stamps: list[int], threshold: float) -> tuple[list[list[float]], list[int], int]:
    """Bars written out one source bar at a time: accumulate until the volume reaches the threshold, close there."""
    bars, times, current, total = [], [], None, 0.0
    used = 0
    for index, (row, stamp) in enumerate(zip(rows, stamps, strict=True)):
        o, h, low, c, v = row
        if current is None:
            current = [o, h, low, c, v]
        else:
            current = [current[0], max(current[1], h), min(current[2], low), c, current[4] + v]
        total += v
        if total >= threshold:
            bars.append(current)
            times.append(stamp)
            current, total, used = None, 0.0, index + 1
    return bars, times, used


def random_market(rng: np.random.Generator, n: int, zero_share: float = 0.2) -> MarketData:
    close = 100 + np.cumsum(rng.normal(size=n))
    open_ = close + rng.normal(size=n) * 0.3
    high = np.maximum(open_, close) + rng.random(n)
    low = np.minimum(open_, close) - rng.random(n)
    volume = rng.exponential(10.0, size=n) * (rng.random(n) > zero_share)
    stamps = np.cumsum(rng.integers(1, 5, size=n)) * 60_000_000_000
    return MarketData("random", stamps.view("datetime64[ns]"), np.stack([open_, high, low, close, volume], axis=1), SPEC)


@settings(deadline=None)
@given(n=st.integers(2, 80), share=st.floats(0.3, 4.0), seed=st.integers(0, 2**31 - 1))
def test_volume_bars_match_the_reference(n: int, share: float, seed: int) -> None:
    market = random_market(np.random.default_rng(seed), n)
    threshold = float(share * 10.0)
    rows, stamps = market.ohlcv.tolist(), market.timestamps.view(np.int64).tolist()
    bars, times, used = reference(rows, stamps, threshold)
    if len(bars) < 2:
        # too few bars for the threshold, or (every volume drawn 0) no volume at all: both refused by name
        with pytest.raises(DataError, match=r"\[data\] (volume_per_bar|bars)"):
            volume_bars(market, threshold)
        return
    got = volume_bars(market, threshold)
    assert got.timestamps.view(np.int64).tolist() == times
    expected = np.array(bars)
    np.testing.assert_array_equal(got.ohlcv[:, :OHLCV.VOLUME], expected[:, :OHLCV.VOLUME])
    np.testing.assert_allclose(got.volume, expected[:, OHLCV.VOLUME], rtol=1e-13, atol=0)
    assert bool((got.volume >= threshold * (1 - 1e-12)).all())
    assert got.instrument.bars_per_year == pytest.approx(SPEC.bars_per_year * len(bars) / used, rel=1e-15)
    assert f"{n - used} trailing source bar(s)" in got.report.notes[-1]


def test_book_and_flow_aggregate_with_the_bars() -> None:
    rng = np.random.default_rng(4)
    base = random_market(rng, 12, zero_share=0.0)
    book = rng.normal(size=(12, BOOK.size()))
    flow = rng.random((12, FLOW.size()))
    market = MarketData("random", base.timestamps, base.ohlcv, SPEC, book=book, flow=flow)
    threshold = 25.0
    got = volume_bars(market, threshold)
    closes, total = [], 0.0
    for index, value in enumerate(base.volume.tolist()):
        total += value
        if total >= threshold:
            closes.append(index)
            total = 0.0
    starts = [0, *(c + 1 for c in closes[:-1])]
    for k, (start, close) in enumerate(zip(starts, closes, strict=True)):
        part = slice(start, close + 1)
        np.testing.assert_array_equal(got.book[k, : BOOK.OFI], book[close, : BOOK.OFI])  # state at the close
        assert got.book[k, BOOK.OFI] == pytest.approx(sum(book[part, BOOK.OFI].tolist()), rel=1e-13, abs=1e-13)
        np.testing.assert_allclose(got.flow[k], [sum(col) for col in flow[part].T.tolist()], rtol=1e-13)


def test_book_levels_are_the_levels_at_each_bars_close() -> None:
    rng = np.random.default_rng(5)
    market = with_book(random_market(rng, 15, zero_share=0.0), seed=6)
    got = volume_bars(market, 30.0)
    closes, total = [], 0.0
    for index, value in enumerate(market.volume.tolist()):
        total += value
        if total >= 30.0:
            closes.append(index)
            total = 0.0
    assert got.levels is not None and got.levels.shape == (len(closes), *market.levels.shape[1:])
    np.testing.assert_array_equal(got.levels, market.levels[closes])


def test_gaps_move_onto_the_bars_they_separate() -> None:
    stamps = np.arange(8, dtype=np.int64) * 60_000_000_000
    ohlcv = np.tile([1.0, 2.0, 0.5, 1.5, 5.0], (8, 1))  # each source bar 5: bars of 10 close on 1, 3, 5, 7
    gaps = (Gap(1, stamps[1].view("datetime64[ns]"), stamps[2].view("datetime64[ns]"), 3),  # between volume bars 0, 1
            Gap(2, stamps[2].view("datetime64[ns]"), stamps[3].view("datetime64[ns]"), 1))  # inside volume bar 1
    market = MarketData("gappy", stamps.view("datetime64[ns]"), ohlcv, SPEC, report=DataReport(rows_read=8, gaps=gaps))
    got = volume_bars(market, 10.0)
    assert len(got) == 4 and [gap.after for gap in got.report.gaps] == [0]
    assert got.report.gaps[0].missing_bars == 3
    assert "1 gap(s) inside a volume bar" in got.report.notes[-1]


def test_bundled_data_as_volume_bars() -> None:
    time_bars = load("sp500-1d-1999-2018")
    threshold = 5e9
    got = load("sp500-1d-1999-2018", bars="volume", volume_per_bar=threshold)
    bars, times, used = reference(time_bars.ohlcv.tolist(), time_bars.timestamps.view(np.int64).tolist(), threshold)
    assert 2 < len(got) == len(bars) < len(time_bars)
    assert got.timestamps.view(np.int64).tolist() == times
    np.testing.assert_allclose(got.ohlcv, np.array(bars), rtol=1e-13)
    assert float(got.volume.sum()) == pytest.approx(float(time_bars.volume[:used].sum()), rel=1e-12)
    assert got.report.frequency == "volume 5e+09" and got.instrument.bar_frequency == "volume 5e+09"


def test_csv_through_the_config(tmp_path) -> None:
    path = tmp_path / "bars.csv"
    lines = ["Date,Open,High,Low,Close,Volume"]
    volumes = [3, 4, 0, 9, 1, 1, 1, 8, 2]
    for day, volume in enumerate(volumes):
        lines.append(f"2020-01-{day + 1:02d},{10 + day},{12 + day},{9 + day},{11 + day},{volume}")
    path.write_text("\n".join(lines) + "\n")
    got = load_from_config(DataConfig(source=str(path), bars="volume", volume_per_bar=7.0))
    # 3+4 closes on day 2; 0+9 on day 4; 1+1+1+8 on day 8; day 9's 2 is left over and dropped
    assert got.timestamps.astype("datetime64[D]").astype(str).tolist() == ["2020-01-02", "2020-01-04", "2020-01-08"]
    np.testing.assert_array_equal(got.ohlcv, [[10, 13, 9, 12, 7], [12, 15, 11, 14, 9], [14, 19, 13, 18, 11]])
    assert "1 trailing source bar(s)" in got.report.notes[-1]


def test_time_bars_are_the_default_and_unchanged() -> None:
    assert DataConfig().bars == "time" and DataConfig().volume_per_bar is None
    assert load_from_config(DataConfig()).content_hash() == load("eurusd-1h-2017").content_hash()


@pytest.mark.parametrize(("overrides", "key"), [
    (['data.bars="tick"'], "bars"),
    (['data.bars="volume"'], "volume_per_bar"),
    (['data.volume_per_bar=5.0'], "volume_per_bar"),
    (['data.bars="volume"', "data.volume_per_bar=-1.0"], "volume_per_bar"),
    (['data.bars="volume"', "data.volume_per_bar=inf"], "volume_per_bar"),
])
def test_bad_settings_name_their_key(overrides: list[str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        load_config(overrides=overrides)


def test_sources_that_cannot_make_volume_bars_say_why(tmp_path) -> None:
    with pytest.raises(DataError, match=r"\[data\] volume_per_bar = 1e\+30 closes 0 volume bar"):
        load("sp500-1d-1999-2018", bars="volume", volume_per_bar=1e30)
    with pytest.raises(DataError, match=r"\[data\] bars"):
        load("sp500-1d-1999-2018", bars="ticks")
    path = tmp_path / "no_volume.csv"
    path.write_text("Date,Open,High,Low,Close\n2020-01-01,1,2,0.5,1.5\n2020-01-02,1,2,0.5,1.5\n")
    with pytest.raises(DataError, match="every bar's volume is 0"):
        load(str(path), columns={"volume": None}, bars="volume", volume_per_bar=1.0)
