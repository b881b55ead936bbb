"""From parsed arrays to a validated :class:`MarketData`: the one path every loader ends in."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import structlog

from foxhunt.data.instrument import PRESETS, InstrumentSpec, preset
from foxhunt.data.market import OHLCV, DataReport, Handover, MarketData
from foxhunt.data.missing import missing_rows
from foxhunt.data.validate import RowLabel, bar_frequency, bars_per_year, find_gaps, validate_bars
from foxhunt.errors import DataError

__all__ = ["DUPLICATE_POLICIES", "build_market", "resolve_instrument"]

log = structlog.get_logger(__name__)

DUPLICATE_POLICIES = ("error", "drop_identical")


def resolve_instrument(instrument: InstrumentSpec | str | None, timestamps: np.ndarray) -> tuple[InstrumentSpec, str | None]:
    """The instrument for a series, and a note when foxhunt filled anything in.

    An explicit :class:`InstrumentSpec` is used as given. A preset name, or no
    instrument (the generic ``EQUITY`` preset), gets its bar frequency and bars per
    year from the data, because a preset cannot know whether the file holds
    minutes or days.
    """
    if isinstance(instrument, InstrumentSpec):
        return instrument, None
    name = "EQUITY" if instrument is None else instrument
    try:
        base = preset(name)
    except KeyError:
        raise DataError(
            f"unknown instrument preset {name!r}; known presets: {', '.join(sorted(PRESETS))} "
            "(e.g. --set data.instrument=ES)"
        ) from None
    if len(timestamps) < 2:
        return base, None
    spec = attrs.evolve(base, bar_frequency=bar_frequency(timestamps), bars_per_year=bars_per_year(timestamps))
    how = "no instrument given: generic EQUITY preset" if instrument is None else f"instrument preset {base.symbol}"
    return spec, f"{how}, bar frequency {spec.bar_frequency} and {spec.bars_per_year:.1f} bars/year measured from the data"


def _drop_identical(ns: np.ndarray, ohlcv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Remove rows identical (time and every value) to the row before; return kept index too."""
    same = np.zeros(ns.shape, dtype=bool)
    same[1:] = (ns[1:] == ns[:-1]) & np.all(ohlcv[1:] == ohlcv[:-1], axis=1)
    keep = np.flatnonzero(~same)
    return ns[keep], ohlcv[keep], np.flatnonzero(same)


def build_market(
    source: str,
    ns: np.ndarray,
    ohlcv: np.ndarray,
    *,
    names: Sequence[str],
    time_column: str,
    label: RowLabel,
    instrument: InstrumentSpec | str | None = None,
    notes: Sequence[str] = (),
    duplicates: str = "error",
    missing: str = "error",
    book: np.ndarray | None = None,
    flow: np.ndarray | None = None,
    levels: np.ndarray | None = None,
    layout: str = "",
    columns: Sequence[tuple[str, str]] = (),
    time_note: str = "",
) -> MarketData:
    """Validate ``ohlcv`` ([bars, OHLCV]) against ``ns`` (UTC int64 ns), scan for gaps, wrap it up.

    Rows without values are dropped or refused by the ``missing`` policy (:mod:`foxhunt.data.missing`), then
    identical duplicates by ``duplicates``; ``layout``, ``columns`` and ``time_note`` go into the report.
    The arrays are handed over to the :class:`MarketData` without a copy: the caller must not keep or write them.
    """
    if duplicates not in DUPLICATE_POLICIES:
        raise DataError(f"{source}: duplicates={duplicates!r} is not a policy; use one of {DUPLICATE_POLICIES}")
    if ohlcv.shape[1] != OHLCV.size() or len(names) != OHLCV.size():
        raise ValueError(f"build_market needs [bars, OHLCV] values and one column name per OHLCV field, got {ohlcv.shape}")
    rows_read = int(ns.shape[0])
    if rows_read == 0:
        raise DataError(f"{source}: no data rows. Point the source at a file with bars in it")
    dropped: tuple[int, ...] = ()
    original_index = np.arange(rows_read)
    empty, missing_note = missing_rows(source, ohlcv, missing, names=names, label=label)
    if empty.size:
        ns, ohlcv, original_index = np.delete(ns, empty), np.delete(ohlcv, empty, axis=0), np.delete(original_index, empty)
        book = None if book is None else np.delete(book, empty, axis=0)
        flow = None if flow is None else np.delete(flow, empty, axis=0)
        levels = None if levels is None else np.delete(levels, empty, axis=0)
        if not ns.size:
            raise DataError(f"{source}: every row's values are missing, so no bars are left. Check the file has prices")
    if duplicates == "drop_identical":
        ns, ohlcv, removed = _drop_identical(ns, ohlcv)
        dropped = tuple(int(original_index[i]) + 1 for i in removed)
        original_index = np.delete(original_index, removed)
        if book is not None:
            book = np.delete(book, removed, axis=0)
        if flow is not None:
            flow = np.delete(flow, removed, axis=0)
        if levels is not None:
            levels = np.delete(levels, removed, axis=0)

    def original_label(index: int) -> str:
        return label(int(original_index[index]))

    validate_bars(source, ns, ohlcv, names, time_column, original_label)
    timestamps = np.asarray(ns, dtype=np.int64).view("datetime64[ns]")
    scan = find_gaps(timestamps)
    spec, instrument_note = resolve_instrument(instrument, timestamps)
    all_notes = [*notes] + ([instrument_note] if instrument_note else [])
    if missing_note:
        all_notes.append(missing_note)
    if dropped:
        all_notes.append(f"dropped {len(dropped)} row(s) identical to the row before them: data rows {list(dropped[:10])}")
    report = DataReport(
        rows_read=rows_read, gaps=scan.gaps, closures=scan.closures, duplicates_dropped=dropped, notes=tuple(all_notes),
        layout=layout, columns=tuple(columns), timestamps=time_note, frequency=bar_frequency(timestamps),
        missing_dropped=tuple(int(i) + 1 for i in empty),
    )
    if scan.gaps:
        log.info("data_gaps", source=source, gaps=len(scan.gaps), missing_bars=report.missing_bars)
    return MarketData(
        source=source, timestamps=Handover(timestamps), ohlcv=Handover(ohlcv), instrument=spec, report=report,
        book=None if book is None else Handover(book), flow=None if flow is None else Handover(flow),
        levels=None if levels is None else Handover(levels),
    )
