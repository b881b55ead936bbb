"""Checks every loader runs on parsed bars, and the gap rule.

Each check raises one :class:`~foxhunt.errors.DataError` for the first offending
row, naming the file, the row and the column, and saying what to do. Loaders pass
a ``RowLabel`` so that the message uses the file's own numbering (CSV rows and
lines, Parquet rows, DBN records).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import numpy as np

from foxhunt.data.hints import set_option
from foxhunt.data.market import OHLCV, Gap
from foxhunt.errors import DataError

__all__ = [
    "RowLabel",
    "csv_row_label",
    "plain_row_label",
    "validate_bars",
    "check_order",
    "GapScan",
    "find_gaps",
    "median_step",
    "bar_frequency",
    "bars_per_year",
    "WEEKEND_CLOSURE",
    "FLOAT32_MAX",
    "FLOAT32_TINY",
]

# Turns an index into the parsed arrays into the file's own row wording.
RowLabel = Callable[[int], str]

DAY_NS = 86_400 * 10**9
HOUR_NS = 3_600 * 10**9
# The longest weekend an intraday market can show in UTC: FX closes Friday 21:00 or
# 22:00 UTC and reopens Sunday 21:00 or 22:00 UTC, and the two ends move on different
# dates when US daylight saving starts and ends, so up to 50 hours may be missing.
WEEKEND_CLOSURE = np.timedelta64(50 * HOUR_NS, "ns")
_EPOCH_WEEKDAY = 3  # 1970-01-01 was a Thursday (Monday = 0)
GAP_CHUNK = 1 << 20  # steps the gap rule scans at a time
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32


def csv_row_label(header_lines: int = 1) -> RowLabel:
    """Label index ``i`` as data row ``i + 1`` and its line in the text file."""
    return lambda index: f"row {index + 1} (line {index + 1 + header_lines})"


def plain_row_label(kind: str = "row") -> RowLabel:
    """Label index ``i`` as ``<kind> i + 1`` (1-based), for Parquet rows and DBN records."""
    return lambda index: f"{kind} {index + 1}"


def _fail(source: str, label: str, column: str, problem: str, action: str) -> DataError:
    return DataError(f"{source}: {label}, column {column!r}: {problem}. {action}")


def validate_bars(
    source: str,
    timestamps: np.ndarray,
    ohlcv: np.ndarray,
    columns: Sequence[str],
    time_column: str,
    label: RowLabel,
) -> None:
    """Reject NaN, non-positive prices, values float32 cannot hold, inverted bars, negative volume, and bad ordering.

    ``columns`` gives the file's column name for each OHLCV position, for messages.
    ``timestamps`` are int64 nanoseconds or datetime64[ns], in file order.
    """
    fix = "Correct or remove that row in the source file and load again"
    for field in OHLCV:
        bad = np.flatnonzero(~np.isfinite(ohlcv[:, field]))
        if bad.size:
            raise _fail(source, label(int(bad[0])), columns[field], "value is missing or not a finite number", fix)
    for field in (OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW, OHLCV.CLOSE):
        bad = np.flatnonzero(ohlcv[:, field] <= 0)
        if bad.size:
            value = float(ohlcv[bad[0], field])
            raise _fail(source, label(int(bad[0])), columns[field], f"price {value!r} is zero or negative; prices must be > 0", fix)
        # Training computes in float32 (docs/reliability.md): a price beyond its range would be infinite there,
        # and one below its smallest normal number would be zero or lose its precision.
        bad = np.flatnonzero((ohlcv[:, field] > FLOAT32_MAX) | (ohlcv[:, field] < FLOAT32_TINY))
        if bad.size:
            value = float(ohlcv[bad[0], field])
            problem = (
                f"price {value!r} is outside [{FLOAT32_TINY:.3g}, {FLOAT32_MAX:.3g}], the range of float32 "
                "the environment computes in"
            )
            raise _fail(source, label(int(bad[0])), columns[field], problem, fix)
    high, low = ohlcv[:, OHLCV.HIGH], ohlcv[:, OHLCV.LOW]
    bad = np.flatnonzero(high < low)
    if bad.size:
        i = int(bad[0])
        raise _fail(source, label(i), columns[OHLCV.HIGH], f"high {float(high[i])!r} is below low {float(low[i])!r}", fix)
    for field in (OHLCV.OPEN, OHLCV.CLOSE):
        value = ohlcv[:, field]
        bad = np.flatnonzero((value < low) | (value > high))
        if bad.size:
            i = int(bad[0])
            problem = (
                f"{field.name.lower()} {float(value[i])!r} is outside the bar's range "
                f"[low {float(low[i])!r}, high {float(high[i])!r}]"
            )
            raise _fail(source, label(i), columns[field], problem, fix)
    bad = np.flatnonzero(ohlcv[:, OHLCV.VOLUME] < 0)
    if bad.size:
        raise _fail(source, label(int(bad[0])), columns[OHLCV.VOLUME], "volume is negative", fix)
    bad = np.flatnonzero(ohlcv[:, OHLCV.VOLUME] > FLOAT32_MAX)
    if bad.size:
        value = float(ohlcv[bad[0], OHLCV.VOLUME])
        raise _fail(source, label(int(bad[0])), columns[OHLCV.VOLUME], f"volume {value!r} is beyond float32's {FLOAT32_MAX:.3g}", fix)
    check_order(source, timestamps, time_column, label)


def check_order(source: str, timestamps: np.ndarray, time_column: str, label: RowLabel) -> None:
    """Duplicate and out-of-order timestamps are errors: foxhunt never reorders rows for you.

    Rows are compared, not subtracted: the difference of two int64 nanosecond times more than 292 years apart
    wraps around, and a wrapped difference once let a decreasing pair through as increasing. Such a step is
    refused too (no later computation could subtract the pair), as is numpy's NaT.
    """
    ns = np.asarray(timestamps).view(np.int64)
    when = ns.view("datetime64[ns]")
    nat = np.flatnonzero(ns == np.iinfo(np.int64).min)
    if nat.size:
        raise _fail(source, label(int(nat[0])), time_column, "timestamp is missing (NaT)", "Fill in or remove that row")
    bad = np.flatnonzero(ns[1:] <= ns[:-1])
    far = _wrapped_steps(ns)
    if far.size and (not bad.size or far[0] < bad[0]):
        i = int(far[0]) + 1
        problem = f"timestamp {when[i]} is more than 292 years after the previous row's {when[i - 1]}"
        raise _fail(source, label(i), time_column, problem, "Correct that row and load again")
    if not bad.size:
        return
    i = int(bad[0]) + 1
    if ns[i] == ns[i - 1]:
        problem = f"timestamp {when[i]} duplicates the previous row's"
        action = (
            "Remove the duplicate row (or, if the rows are identical, load with "
            f"{set_option('duplicates', 'drop_identical')} to drop each row identical to the one before)"
        )
    elif ns.size > 2 and np.all(ns[1:] < ns[:-1]):
        problem = (
            f"timestamp {when[i]} is earlier than the previous row's {when[i - 1]}, and every row is: the file runs "
            "newest first (as some exchange exports do)"
        )
        action = "Reverse the data rows (keep the header on top; foxhunt does not reorder rows) and load again"
    else:
        problem = f"timestamp {when[i]} is earlier than the previous row's {when[i - 1]}; rows must be in time order"
        action = "Sort the file by time (foxhunt does not reorder rows) and load again"
    raise _fail(source, label(i), time_column, problem, action)


def _wrapped_steps(ns: np.ndarray) -> np.ndarray:
    """Indices i where ns[i + 1] > ns[i] but their int64 difference wraps (more than 292 years), a chunk at a time."""
    found = []
    for a in range(0, ns.size - 1, GAP_CHUNK):
        following = ns[a + 1 : a + 1 + GAP_CHUNK]
        previous = ns[a : a + following.size]
        found.append(a + np.flatnonzero((following > previous) & (following - previous < 0)))
    return np.concatenate(found) if found else np.empty(0, dtype=np.int64)


@attrs.frozen
class GapScan:
    gaps: tuple[Gap, ...]
    closures: int


def _spans_saturday_noon(previous: np.ndarray, following: np.ndarray) -> np.ndarray:
    """Whether (previous, following) contains a Saturday 12:00 UTC, i.e. the interval crosses a weekend."""
    day = previous // DAY_NS
    weekday = (day + _EPOCH_WEEKDAY) % 7
    # next Saturday noon at or after `previous` (Saturday = 5)
    saturday = (day + (5 - weekday) % 7) * DAY_NS + DAY_NS // 2
    saturday = np.where(saturday < previous, saturday + 7 * DAY_NS, saturday)
    return saturday < following


def median_step(ns: np.ndarray) -> int:
    """The lower median of the steps between consecutive times: an actual step, never an average of two."""
    step = np.diff(ns)
    middle = (step.size - 1) // 2
    step.partition(middle)  # in place: the steps are this function's own, and a sorted copy would double them
    return int(step[middle])


def find_gaps(timestamps: np.ndarray) -> GapScan:
    """Missing bars relative to the median spacing, with weekends and holidays excused.

    The rule (docs/data.md, "Gaps"): with median spacing ``d``,
    - intraday (``d`` < 1 day): a step of ``k * d`` has ``k - 1`` missing bars; if the
      step crosses a weekend, up to :data:`WEEKEND_CLOSURE` of them are the closure;
    - daily (1 day <= ``d`` < 7 days) on weekday-only data: missing weekdays are
      counted; one missing weekday is an exchange holiday, two or more are a gap;
    - anything else (weekly bars, or daily data with weekend bars): ``k - 1``.

    Steps are scanned :data:`GAP_CHUNK` at a time, so the rule's temporaries do not grow with the file.
    """
    ns = np.asarray(timestamps).view(np.int64)
    if ns.size < 3:
        return GapScan((), 0)
    spacing = median_step(ns)
    weekend_bars = sum(
        int(np.count_nonzero((ns[a : a + GAP_CHUNK] // DAY_NS + _EPOCH_WEEKDAY) % 7 >= 5)) for a in range(0, ns.size, GAP_CHUNK)
    )
    weekday_daily = DAY_NS <= spacing < 7 * DAY_NS and weekend_bars <= ns.size // 10
    gaps: list[Gap] = []
    closures = 0
    for a in range(0, ns.size - 1, GAP_CHUNK):
        following = ns[a + 1 : a + 1 + GAP_CHUNK]
        previous = ns[a : a + following.size]
        missing, closed = _missing_bars(previous, following, spacing, weekday_daily)
        gaps.extend(
            Gap(
                after=a + int(i),
                previous=previous[i].astype("datetime64[ns]"),
                next=following[i].astype("datetime64[ns]"),
                missing_bars=int(missing[i]),
            )
            for i in np.flatnonzero(missing > 0)
        )
        closures += int(np.count_nonzero(closed & (missing == 0)))
    return GapScan(tuple(gaps), closures)


def _missing_bars(previous: np.ndarray, following: np.ndarray, spacing: int, weekday_daily: bool) -> tuple[np.ndarray, np.ndarray]:
    """Missing bars of each step, and which steps are an expected closure (the rule of :func:`find_gaps`)."""
    if spacing < DAY_NS:
        missing = np.rint((following - previous) / spacing).astype(np.int64) - 1
        crosses = _spans_saturday_noon(previous, following)
        allowance = int(WEEKEND_CLOSURE.view(np.int64)) // spacing
        return np.where(crosses, np.maximum(missing - allowance, 0), missing), crosses & (missing > 0)
    if weekday_daily:
        days_prev = (previous // DAY_NS).astype("datetime64[D]")
        days_next = (following // DAY_NS).astype("datetime64[D]")
        weekdays_between = np.busday_count(days_prev + 1, days_next)
        return np.where(weekdays_between >= 2, weekdays_between, 0), weekdays_between == 1
    return np.rint((following - previous) / spacing).astype(np.int64) - 1, np.zeros(previous.shape, dtype=bool)


_FREQUENCIES = (("d", DAY_NS), ("h", HOUR_NS), ("m", 60 * 10**9), ("s", 10**9))


def bar_frequency(timestamps: np.ndarray) -> str:
    """Median spacing written as '1d', '1h', '5m', '1s', ... (or nanoseconds when irregular)."""
    ns = np.asarray(timestamps).view(np.int64)
    if ns.size < 2:
        return "unknown"
    spacing = median_step(ns)
    for suffix, unit in _FREQUENCIES:
        if spacing >= unit and spacing % unit == 0:
            return f"{spacing // unit}{suffix}"
    return f"{spacing}ns"


def bars_per_year(timestamps: np.ndarray) -> float:
    """Bars per calendar year actually observed: ``(n - 1) / span in years`` (365.25-day years).

    Honest for annualising: it counts the bars the market really had (weekends,
    holidays and gaps included), rather than a convention such as 252 x 24.
    """
    ns = np.asarray(timestamps).view(np.int64)
    if ns.size < 2:
        raise DataError("bars per year needs at least two bars; load a longer series")
    years = (int(ns[-1]) - int(ns[0])) / (365.25 * DAY_NS)
    return float((ns.size - 1) / years)
