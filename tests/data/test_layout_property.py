"""Property: the same bars written in any recognised layout load to the same bars, or to one foxhunt error.

Bars are drawn (hourly or daily, prices with four decimals, integer volumes), some rows are written as a
vendor's "no data" row ('.', 'null', 'NaN' or empty), and the file is written as one of the layouts of
docs/data.md, "Layouts". Loading must give exactly the drawn bars (close-only layouts: OHLC = close,
volume 0) with the marker rows listed in the report, or a FoxhuntError naming the file; any other
exception fails.
"""

from __future__ import annotations

import datetime
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.data import load
from foxhunt.errors import DataError, FoxhuntError

_counter = itertools.count()
HOUR, DAY = 3600, 86400
START = 1_262_304_000  # 2010-01-01 UTC


def _utc(seconds: int, fmt: str) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime(fmt)


def _num(value: float, decimal: str = ".") -> str:
    return f"{value:.4f}".replace(".", decimal)


# name -> (bar step, header or None, a function (seconds, prices or None, volume) -> the row's text)
def _ohlcv(sep: str = ",", decimal: str = "."):
    def cells(prices, volume):
        if prices is None:
            return [""] * 4 + [""]
        return [_num(p, decimal) for p in prices] + [str(volume)]

    return sep, cells


LAYOUTS = {
    "canonical": (HOUR, "time,open,high,low,close,volume", lambda s: [_utc(s, "%Y-%m-%d %H:%M:%S")], *_ohlcv()),
    "pandas_index": (HOUR, ",Open,High,Low,Close,Volume", lambda s: [_utc(s, "%Y-%m-%d %H:%M:%S+00:00")], *_ohlcv()),
    "banner": (HOUR, "https://www.CryptoDataDownload.com\ndate,open,high,low,close,volume",
               lambda s: [_utc(s, "%Y-%m-%d %H:%M:%S")], *_ohlcv()),
    "semicolon_decimal_comma": (HOUR, "Date;Open;High;Low;Close;Volume", lambda s: [_utc(s, "%d.%m.%Y %H:%M")],
                                *_ohlcv(";", ",")),
    "metatrader_headerless": (HOUR, None, lambda s: [_utc(s, "%Y.%m.%d"), _utc(s, "%H:%M")], *_ohlcv("\t")),
    "binance_klines": (HOUR, None, lambda s: [str(s * 1000)], ","),
    "epoch_seconds": (HOUR, "timestamp,open,high,low,close,volume", lambda s: [str(s)], *_ohlcv()),
    "utc_z": (HOUR, "time,open,high,low,close,volume", lambda s: [_utc(s, "%Y-%m-%dT%H:%M:%SZ")], *_ohlcv()),
    "headerless": (HOUR, None, lambda s: [_utc(s, "%Y-%m-%d %H:%M")], *_ohlcv()),
    "yahoo": (DAY, "Date,Open,High,Low,Close,Adj Close,Volume", lambda s: [_utc(s, "%Y-%m-%d")], ","),
    "fred_close_only": (DAY, "DATE,SP500", lambda s: [_utc(s, "%Y-%m-%d")], ","),
}  # fmt: skip


def _row(layout: str, seconds: int, prices: list[float] | None, volume: int, marker: str) -> str:
    step, header, times, sep, *cells = LAYOUTS[layout]
    if layout == "binance_klines":
        values = [marker] * 5 if prices is None else [_num(p) for p in prices] + [str(volume)]
        rest = [str(seconds * 1000 + step * 1000 - 1), "1.5", "7", "0.5", "0.75", "0"]
        return sep.join([*times(seconds), *values, *rest])
    if layout == "yahoo":
        values = [marker] * 6 if prices is None else [*(_num(p) for p in prices), _num(prices[3] * 0.9), str(volume)]
        return sep.join([*times(seconds), *values])
    if layout == "fred_close_only":
        return sep.join([*times(seconds), marker if prices is None else _num(prices[3])])
    values = cells[0](prices, volume)
    if prices is None:
        values = [marker] * len(values)
    return sep.join([*times(seconds), *values])


@st.composite
def layout_files(draw: st.DrawFn):
    layout = draw(st.sampled_from(sorted(LAYOUTS)))
    step = LAYOUTS[layout][0]
    n = draw(st.integers(3, 10))
    start = START + step * draw(st.integers(0, 50_000)) // (step // HOUR) * (step // HOUR)
    bars = []
    for _ in range(n):
        a, b = draw(st.integers(10_000, 9_999_999)), draw(st.integers(10_000, 9_999_999))
        up, down = draw(st.integers(0, 50_000)), draw(st.integers(0, 9_999))
        bars.append(([a / 1e4, (max(a, b) + up) / 1e4, (min(a, b) - down) / 1e4, b / 1e4], draw(st.integers(0, 10**6))))
    empty = draw(st.sets(st.integers(1, n - 2), max_size=2))  # never the first or last row
    marker = draw(st.sampled_from([".", "null", "NaN", ""]))
    return layout, start, step, bars, sorted(empty), marker


@given(layout_files())
def test_every_layout_loads_to_the_canonical_bars_or_is_one_foxhunt_error(tmp_path_factory, case):
    layout, start, step, bars, empty, marker = case
    header = LAYOUTS[layout][1]
    times = [start + i * step for i in range(len(bars))]
    lines = [] if header is None else header.split("\n")
    lines += [_row(layout, t, None if i in empty else p, v, marker) for i, (t, (p, v)) in enumerate(zip(times, bars, strict=True))]
    path = tmp_path_factory.mktemp("layouts") / f"{layout}_{next(_counter)}.csv"
    path.write_text("\n".join(lines) + "\n")
    try:
        market = load(str(path))
    except FoxhuntError as error:
        assert str(path) in str(error) and "\n" not in str(error)
        assert isinstance(error, DataError)
        return
    kept = [i for i in range(len(bars)) if i not in empty]
    expected = np.array([[*bars[i][0], bars[i][1]] for i in kept])
    if layout == "fred_close_only":
        expected = np.column_stack([expected[:, 3]] * 4 + [np.zeros(len(kept))])
    np.testing.assert_array_equal(market.timestamps, np.array(times, "datetime64[s]")[kept].astype("datetime64[ns]"))
    np.testing.assert_array_equal(market.ohlcv, expected)
    assert market.report.missing_dropped == tuple(i + 1 for i in empty)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_of_the_property_loads_without_settings(tmp_path, layout):
    """The property may end in an error; here every layout, written cleanly, must load."""
    step, header = LAYOUTS[layout][0], LAYOUTS[layout][1]
    bars = [([1.0, 1.2, 0.9, 1.1], 10), ([1.1, 1.3, 1.0, 1.2], 11), ([1.2, 1.4, 1.1, 1.3], 12)]
    lines = ([] if header is None else header.split("\n")) + [_row(layout, START + i * step, p, v, ".") for i, (p, v) in enumerate(bars)]
    path = tmp_path / f"{layout}.csv"
    path.write_text("\n".join(lines) + "\n")
    market = load(str(path))
    np.testing.assert_array_equal(market.close, [1.1, 1.2, 1.3])
