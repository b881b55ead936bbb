"""The immutable market-data type every later stage reads.

A :class:`MarketData` is a validated, time-ordered bar series with the contract it
prices. Its arrays are private read-only copies, so the environment, the feature
cache and the fold splitter can share one instance without defensive copies, and
``content_hash`` can key caches without worrying that someone mutated the data.
"""

from __future__ import annotations

import hashlib
import json

import attrs
import numpy as np

from foxhunt.data.instrument import InstrumentSpec
from foxhunt.dims import DimTable, auto

__all__ = ["OHLCV", "BOOK", "BOOK_LEVELS", "LEVEL", "FLOW", "Gap", "DataReport", "Handover", "MarketData"]


class OHLCV(DimTable):
    """Columns of ``MarketData.ohlcv`` (one row per bar)."""

    OPEN = auto()
    HIGH = auto()
    LOW = auto()
    CLOSE = auto()
    VOLUME = auto()


class BOOK(DimTable):
    """Columns of ``MarketData.book``: MBP-10 state at each bar's close, plus the bar's order-flow imbalance."""

    BID_PRICE = auto()  # best bid
    ASK_PRICE = auto()  # best ask
    BID_SIZE = auto()  # size at the best bid
    ASK_SIZE = auto()  # size at the best ask
    BID_DEPTH = auto()  # total size over the ten bid levels
    ASK_DEPTH = auto()  # total size over the ten ask levels
    OFI = auto()  # Cont-Kukanov-Stoikov order-flow imbalance summed over the bar's book events


BOOK_LEVELS = 10  # the levels of an MBP-10 book, best first


class LEVEL(DimTable):
    """Last axis of ``MarketData.levels`` ``[bars, BOOK_LEVELS, LEVEL]``: one level of the MBP-10 book at each
    bar's close (level 0 the best; prices in instrument units, sizes in contracts)."""

    BID_PRICE = auto()
    ASK_PRICE = auto()
    BID_SIZE = auto()
    ASK_SIZE = auto()


class FLOW(DimTable):
    """Columns of ``MarketData.flow``: trade prints aggregated per bar, split by aggressor side."""

    BUY_VOLUME = auto()  # size of trades whose aggressor bought (lifted the ask)
    SELL_VOLUME = auto()  # size of trades whose aggressor sold (hit the bid)
    TRADES = auto()  # number of trade prints


@attrs.frozen
class Gap:
    """Bars missing between bar ``after`` and bar ``after + 1`` (indices into the series)."""

    after: int
    previous: np.datetime64
    next: np.datetime64
    missing_bars: int

    def describe(self) -> str:
        return f"{self.missing_bars} bar(s) missing between {self.previous} and {self.next}"


@attrs.frozen
class DataReport:
    """What loading found: the layout, the columns used, how times were read, gaps, dropped rows and notes.

    Nothing is dropped or reordered silently: anything the loader did beyond
    reading the rows as they are is written here. ``describe()`` is the report
    ``foxhunt data inspect`` prints.
    """

    rows_read: int = 0
    gaps: tuple[Gap, ...] = ()
    closures: int = 0  # weekend / holiday steps that the gap rule treats as expected (docs/data.md)
    duplicates_dropped: tuple[int, ...] = ()  # 1-based data rows of identical repeated rows that were removed
    notes: tuple[str, ...] = ()
    layout: str = ""  # the file layout recognised, e.g. "Yahoo Finance daily CSV"
    columns: tuple[tuple[str, str], ...] = ()  # (role, the file's column) for each role read
    timestamps: str = ""  # how the time column was read, with its time zone
    frequency: str = ""  # the median bar spacing, '1h', '1d', ...
    missing_dropped: tuple[int, ...] = ()  # 1-based data rows dropped because their values were missing

    @property
    def missing_bars(self) -> int:
        return sum(gap.missing_bars for gap in self.gaps)

    def with_note(self, note: str) -> DataReport:
        return attrs.evolve(self, notes=(*self.notes, note))

    def slice(self, start: int, stop: int) -> DataReport:
        """The report restricted to bars ``start:stop`` (gap indices shifted to the slice)."""
        inside = tuple(attrs.evolve(gap, after=gap.after - start) for gap in self.gaps if start <= gap.after < stop - 1)
        return attrs.evolve(self, gaps=inside, notes=(*self.notes, f"sliced to bars {start}:{stop}"))

    def summary(self) -> str:
        parts = [f"{self.rows_read} rows read", f"{len(self.gaps)} gap(s) ({self.missing_bars} missing bars)"]
        parts.append(f"{self.closures} expected closure(s)")
        if self.duplicates_dropped:
            parts.append(f"{len(self.duplicates_dropped)} identical duplicate row(s) dropped")
        if self.missing_dropped:
            parts.append(f"{len(self.missing_dropped)} row(s) without values dropped")
        return ", ".join(parts) + "".join(f"; {note}" for note in self.notes)

    def describe(self, gaps_shown: int = 5) -> list[str]:
        """The report as short lines: layout, columns, times, frequency, gaps, dropped rows, notes."""
        lines = []
        if self.layout:
            lines.append(f"layout: {self.layout}")
        if self.columns:
            lines.append("columns: " + ", ".join(f"{role} <- {name!r}" for role, name in self.columns))
        if self.timestamps:
            lines.append(f"timestamps: {self.timestamps}")
        if self.frequency:
            lines.append(f"frequency: {self.frequency}")
        dropped = len(self.duplicates_dropped) + len(self.missing_dropped)
        lines.append(f"rows: {self.rows_read} read, {self.rows_read - dropped} kept, {dropped} dropped")
        lines.append(f"gaps: {len(self.gaps)} ({self.missing_bars} missing bars), {self.closures} expected closure(s)")
        lines.extend(f"  {gap.describe()}" for gap in self.gaps[:gaps_shown])
        if len(self.gaps) > gaps_shown:
            lines.append(f"  ... and {len(self.gaps) - gaps_shown} more")
        lines.extend(f"note: {note}" for note in self.notes)
        return lines


@attrs.frozen(eq=False)
class Handover:
    """An array given to :class:`MarketData` by a loader that keeps no reference to it: taken without a copy.

    Loaders build their arrays fresh and drop them once the record exists, so copying them again only doubled the
    peak memory of a large file (docs/data.md, "Memory"). Anyone else's array is copied, as before.
    """

    array: np.ndarray


def _frozen_array(dtype: type) -> object:
    """attrs converter: a private, C-contiguous, read-only copy (callers keep their own arrays), or a handed-over one."""

    def convert(value: object) -> np.ndarray | None:
        if value is None:
            return None
        if isinstance(value, Handover):
            array = np.ascontiguousarray(value.array, dtype=dtype)  # no copy when it already is what is stored
        else:
            array = np.array(value, dtype=dtype, order="C", copy=True)
        array.flags.writeable = False
        return array

    return convert


def _check_table(table: type[DimTable]) -> object:
    def check(instance: MarketData, attribute: attrs.Attribute, value: np.ndarray | None) -> None:
        if value is None:
            return
        if value.ndim != 2 or value.shape[1] != table.size():
            raise ValueError(f"MarketData.{attribute.name} must have shape [bars, {table.__name__}={table.size()}], got {value.shape}")
        if value.shape[0] != instance.timestamps.shape[0]:
            raise ValueError(f"MarketData.{attribute.name} has {value.shape[0]} rows for {instance.timestamps.shape[0]} timestamps")

    return check


def _check_levels(instance: MarketData, attribute: attrs.Attribute, value: np.ndarray | None) -> None:
    if value is None:
        return
    if value.shape != (instance.timestamps.shape[0], BOOK_LEVELS, LEVEL.size()):
        raise ValueError(f"MarketData.levels must have shape [bars={instance.timestamps.shape[0]}, {BOOK_LEVELS}, "
                         f"LEVEL={LEVEL.size()}], got {value.shape}")


def _check_timestamps(instance: MarketData, attribute: attrs.Attribute, value: np.ndarray) -> None:
    if value.ndim != 1:
        raise ValueError(f"MarketData.timestamps must be one-dimensional, got shape {value.shape}")
    ns = value.view(np.int64)
    if value.size > 1 and not np.all(ns[1:] > ns[:-1]):  # compared, not subtracted: no int64 temporary
        raise ValueError("MarketData.timestamps must be strictly increasing (the loaders validate this)")


@attrs.frozen(eq=False)
class MarketData:
    """A validated bar series. ``timestamps`` are UTC and label each bar's open time.

    ``ohlcv`` is ``[bars, OHLCV]`` float64; ``book`` (``[bars, BOOK]``) exists for
    MBP-10 sources and ``flow`` (``[bars, FLOW]``) for sources with trade prints;
    ``levels`` (``[bars, BOOK_LEVELS, LEVEL]``) holds each level of an MBP-10 book
    at the bar's close (None where the source has no levels).
    Equality is identity; compare ``content_hash()`` to compare contents.
    """

    source: str
    timestamps: np.ndarray = attrs.field(converter=_frozen_array(np.dtype("datetime64[ns]")), validator=_check_timestamps)
    ohlcv: np.ndarray = attrs.field(converter=_frozen_array(np.float64), validator=_check_table(OHLCV))
    instrument: InstrumentSpec
    report: DataReport = attrs.field(factory=DataReport)
    book: np.ndarray | None = attrs.field(default=None, converter=_frozen_array(np.float64), validator=_check_table(BOOK))
    flow: np.ndarray | None = attrs.field(default=None, converter=_frozen_array(np.float64), validator=_check_table(FLOW))
    levels: np.ndarray | None = attrs.field(default=None, converter=_frozen_array(np.float64), validator=_check_levels)

    def __len__(self) -> int:
        return int(self.timestamps.shape[0])

    @property
    def open(self) -> np.ndarray:
        return self.ohlcv[:, OHLCV.OPEN]

    @property
    def high(self) -> np.ndarray:
        return self.ohlcv[:, OHLCV.HIGH]

    @property
    def low(self) -> np.ndarray:
        return self.ohlcv[:, OHLCV.LOW]

    @property
    def close(self) -> np.ndarray:
        return self.ohlcv[:, OHLCV.CLOSE]

    @property
    def volume(self) -> np.ndarray:
        return self.ohlcv[:, OHLCV.VOLUME]

    @property
    def start(self) -> np.datetime64:
        return self.timestamps[0]

    @property
    def end(self) -> np.datetime64:
        return self.timestamps[-1]

    @property
    def bar_spacing(self) -> np.timedelta64:
        """Median spacing between consecutive bars (the nominal bar length)."""
        if len(self) < 2:
            raise ValueError(f"{self.source}: a bar spacing needs at least 2 bars, this series has {len(self)}")
        return np.timedelta64(int(np.quantile(np.diff(self.timestamps.view(np.int64)), 0.5, method="lower")), "ns")

    def slice(self, start: int, stop: int) -> MarketData:
        """Bars ``start:stop`` as a new MarketData (same instrument, report restricted to the slice)."""
        if not 0 <= start < stop <= len(self):
            raise ValueError(f"slice({start}, {stop}) is outside the {len(self)} bars of {self.source}")
        return MarketData(
            source=self.source,
            timestamps=self.timestamps[start:stop],
            ohlcv=self.ohlcv[start:stop],
            instrument=self.instrument,
            report=self.report.slice(start, stop),
            book=None if self.book is None else self.book[start:stop],
            flow=None if self.flow is None else self.flow[start:stop],
            levels=None if self.levels is None else self.levels[start:stop],
        )

    def content_hash(self) -> str:
        """sha256 (hex) of the arrays and the instrument; independent of ``source`` and ``report``.

        Arrays are hashed in a fixed byte order with their shapes, so the hash is
        stable across machines and runs and keys the feature cache. ``levels`` counts
        only where present, so a market without them keeps the hash it had before
        they existed.
        """
        digest = hashlib.sha256(b"foxhunt.MarketData/1\n")
        for name in ("timestamps", "ohlcv", "book", "flow", *(("levels",) if self.levels is not None else ())):
            array = getattr(self, name)
            digest.update(name.encode() + b"\0")
            if array is None:
                digest.update(b"none\0")
                continue
            canonical = array.view(np.int64) if name == "timestamps" else array
            digest.update(repr(array.shape).encode() + b"\0")
            digest.update(np.ascontiguousarray(canonical, dtype=canonical.dtype.newbyteorder("<")).tobytes())
        instrument = json.dumps(attrs.asdict(self.instrument), sort_keys=True)
        digest.update(b"instrument\0" + instrument.encode())
        return digest.hexdigest()
