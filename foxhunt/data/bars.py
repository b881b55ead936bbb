"""Volume bars: a loaded market re-sampled into bars of (at least) equal traded volume (``[data] bars = "volume"``).

A volume bar is a run of consecutive source bars. It opens on the first source bar after the previous volume bar
closed and **closes on the source bar where its accumulated volume first reaches** ``volume_per_bar``; no source bar
is split. So every volume bar holds at least ``volume_per_bar`` and its OHLCV is exactly that of its source bars:

* open: the first source bar's open; close: the last one's close;
* high: the largest high; low: the smallest low; volume: the sum of the volumes;
* timestamp: the closing (last) source bar's, so a volume bar carries the time at which it was complete;
* ``book`` (MBP-10 state at the close): the last source bar's, except ``OFI``, which is summed over the source bars;
* ``levels`` (each level of an MBP-10 book at the close): the last source bar's;
* ``flow`` (buy and sell volume, trade count): summed.

The overshoot of the closing bar is not carried into the next volume bar (splitting a time bar's volume would need
its prices split too, which the data does not have). Source bars after the last volume bar that closed (less volume
than ``volume_per_bar`` in all) are dropped, and the report says how many. ``bars_per_year`` is scaled by how many
source bars a volume bar holds on average, so Sharpe is annualised over the volume bars' own count.
"""

from __future__ import annotations

import attrs
import numpy as np

from foxhunt.data.market import BOOK, OHLCV, DataReport, Handover, MarketData
from foxhunt.errors import DataError

__all__ = ["BAR_KINDS", "check_bar_settings", "closing_bars", "volume_bars"]

BAR_KINDS = ("time", "volume")


def check_bar_settings(bars: str, volume_per_bar: float | None) -> None:
    """Raise ``ValueError`` naming the ``[data]`` key when ``bars`` / ``volume_per_bar`` do not fit together."""
    if bars not in BAR_KINDS:
        raise ValueError(f"[data] bars must be one of {list(BAR_KINDS)}, got {bars!r}")
    if bars == "time":
        if volume_per_bar is not None:
            raise ValueError(f"[data] volume_per_bar = {volume_per_bar!r} applies only with [data] bars = \"volume\"; "
                             "set bars = \"volume\" or leave volume_per_bar unset")
        return
    if volume_per_bar is None:
        raise ValueError("[data] bars = \"volume\" needs [data] volume_per_bar, the volume each bar holds (> 0)")
    if isinstance(volume_per_bar, bool) or not isinstance(volume_per_bar, (int, float)):
        raise ValueError(f"[data] volume_per_bar must be a number, got {volume_per_bar!r}")
    if not (np.isfinite(volume_per_bar) and volume_per_bar > 0):
        raise ValueError(f"[data] volume_per_bar must be a finite number > 0, got {volume_per_bar!r}")


def closing_bars(volume: np.ndarray, volume_per_bar: float) -> np.ndarray:
    """Indices of the source bars that close a volume bar, increasing (``int64``)."""
    closes = []
    total = 0.0
    for index, value in enumerate(volume.tolist()):
        total += value
        if total >= volume_per_bar:
            closes.append(index)
            total = 0.0
    return np.asarray(closes, dtype=np.int64)


def volume_bars(market: MarketData, volume_per_bar: float) -> MarketData:
    """``market`` re-sampled into volume bars of ``volume_per_bar`` (module docstring: the rule)."""
    check_bar_settings("volume", volume_per_bar)
    volume = market.volume
    if not float(volume.max(initial=0.0)) > 0:
        raise DataError(f"{market.source}: [data] bars = \"volume\" needs traded volume, and every bar's volume is 0 "
                        "(the source has no volume column?). Use a source with volumes or [data] bars = \"time\"")
    closes = closing_bars(volume, float(volume_per_bar))
    if closes.size < 2:
        raise DataError(f"{market.source}: [data] volume_per_bar = {volume_per_bar!r} closes {closes.size} volume "
                        f"bar(s) over the series' total volume {float(volume.sum()):.6g}; it needs at least 2. "
                        "Lower volume_per_bar")
    starts = np.concatenate([[0], closes[:-1] + 1])
    used = int(closes[-1]) + 1  # reduceat's last segment runs to its input's end: every input stops at the last close
    source = market.ohlcv[:used]
    ohlcv = np.empty((closes.size, OHLCV.size()), dtype=np.float64)
    ohlcv[:, OHLCV.OPEN] = source[starts, OHLCV.OPEN]
    ohlcv[:, OHLCV.HIGH] = np.maximum.reduceat(source[:, OHLCV.HIGH], starts)
    ohlcv[:, OHLCV.LOW] = np.minimum.reduceat(source[:, OHLCV.LOW], starts)
    ohlcv[:, OHLCV.CLOSE] = source[closes, OHLCV.CLOSE]
    ohlcv[:, OHLCV.VOLUME] = np.add.reduceat(source[:, OHLCV.VOLUME], starts)
    book = None
    if market.book is not None:
        book = np.array(market.book[closes], dtype=np.float64)
        book[:, BOOK.OFI] = np.add.reduceat(market.book[:used, BOOK.OFI], starts)
    flow = None if market.flow is None else np.add.reduceat(market.flow[:used], starts, axis=0)
    # the book's levels are a state, like its best level: each volume bar keeps the levels at its close
    levels = None if market.levels is None else np.array(market.levels[closes], dtype=np.float64)
    instrument = attrs.evolve(market.instrument, bar_frequency=f"volume {volume_per_bar:g}",
                              bars_per_year=market.instrument.bars_per_year * closes.size / used)
    return MarketData(source=market.source, timestamps=market.timestamps[closes], ohlcv=Handover(ohlcv),
                      instrument=instrument, report=_report(market, closes, volume_per_bar),
                      book=None if book is None else Handover(book), flow=None if flow is None else Handover(flow),
                      levels=levels)


def _report(market: MarketData, closes: np.ndarray, volume_per_bar: float) -> DataReport:
    """The source's report with its gaps moved onto the volume bars they fall between and a note of the re-sampling."""
    used = int(closes[-1]) + 1
    kept, inside = [], 0
    for gap in market.report.gaps:
        k = int(np.searchsorted(closes, gap.after))
        if k < closes.size - 1 and int(closes[k]) == gap.after:
            kept.append(attrs.evolve(gap, after=k))
        else:
            inside += 1
    note = (f"volume bars of {volume_per_bar:g}: {used} source bars -> {closes.size} bars "
            f"(timestamps are each bar's closing source bar); {len(market) - used} trailing source bar(s) "
            f"holding less than a bar's volume dropped")
    if inside:
        note += f"; {inside} gap(s) inside a volume bar or in the dropped tail no longer separate bars"
    report = market.report.with_note(note)
    return attrs.evolve(report, gaps=tuple(kept), frequency=f"volume {volume_per_bar:g}")
