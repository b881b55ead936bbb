"""Timestamp parsing with explicit timezone handling, vectorised through pyarrow.

Text timestamps are split into a base (date and time to the second), an optional
fraction of a second and an optional UTC offset (``Z``, ``UTC``, ``+01:00``,
``-0500``). The base is parsed with one ``strptime`` format for the whole column:
either the one given, or the single candidate in :data:`CANDIDATE_FORMATS` that
parses every row. Timestamps with an offset are exact; naive ones are read as wall
time in ``timezone`` (ambiguous or non-existent wall times are errors, not guesses).
Arrow's ``strptime`` accepts a day past the end of its month and a second 60 and
rolls them over (``2021-02-31`` becomes March 3), so every parsed row is written
back with the same format and compared with its text: a row that does not come
back is not a calendar date or time, and is an error.
Integer columns are Unix epoch times; the unit is chosen from their magnitude.
"""

from __future__ import annotations

import re
import zoneinfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from foxhunt.data.validate import RowLabel
from foxhunt.errors import DataError

__all__ = ["CANDIDATE_FORMATS", "parse_timestamps", "check_timezone"]

CANDIDATE_FORMATS: tuple[str, ...] = (
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
    "%Y.%m.%d %H:%M:%S",
    "%Y.%m.%d %H:%M",
    "%Y.%m.%d",
    "%Y%m%d %H:%M:%S",
    "%Y%m%d",
    "%d.%m.%Y %H:%M:%S",
    "%d.%m.%Y %H:%M",
    "%d.%m.%Y",
    "%m/%d/%Y %H:%M:%S",
    "%m/%d/%Y %H:%M",
    "%m/%d/%Y",
    "%d/%m/%Y %H:%M:%S",
    "%d/%m/%Y %H:%M",
    "%d/%m/%Y",
)

# base: everything up to the seconds (or minutes); then fraction; then offset.
_SPLIT = r"^(?P<base>.*?\d:\d\d(?::\d\d)?)(?P<frac>\.\d{1,9})?\s*(?P<off>Z|UTC|[+-]\d\d:?\d\d)?$"
# Epoch magnitudes of today's dates: seconds ~1.7e9, ms ~1.7e12, us ~1.7e15, ns ~1.7e18.
# Directives whose overflow can only roll a day into the next month's first three days or a second 60 into the
# next minute (see _refuse_rolled_over); any other directive in a format has every row checked.
_ROLL_DIRECTIVES = frozenset("YmdHMSyIpbBaAe%")
_EPOCH_UNITS = ((10**11, 10**9, "seconds"), (10**14, 10**6, "milliseconds"), (10**17, 10**3, "microseconds"))


def check_timezone(timezone: str) -> str:
    """The timezone name if the tz database knows it; a DataError saying so otherwise."""
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise DataError(f"unknown timezone {timezone!r}; use an IANA name such as 'UTC', 'Europe/London' or 'America/New_York'") from None
    return timezone


def parse_timestamps(
    values: pa.Array | pa.ChunkedArray,
    *,
    source: str,
    column: str,
    label: RowLabel,
    timezone: str = "UTC",
    timestamp_format: str | None = None,
) -> tuple[np.ndarray, str]:
    """Parse one column into UTC int64 nanoseconds; also return a note on how it was read."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    check_timezone(timezone)
    kind = values.type
    nulls = np.flatnonzero(np.asarray(values.is_null()))
    if nulls.size:
        raise DataError(f"{source}: {label(int(nulls[0]))}, column {column!r}: timestamp is empty. Fill in or remove that row")
    if pa.types.is_timestamp(kind):
        ns = values.cast(pa.timestamp("ns", kind.tz))
        if kind.tz is None:
            return _localize(ns, timezone, source, column, label), f"{column}: naive timestamps read as {timezone}"
        return np.asarray(ns.cast(pa.int64())), f"{column}: timestamps carry timezone {kind.tz}"
    if pa.types.is_date(kind):
        ns = values.cast(pa.timestamp("ns"))
        return _localize(ns, timezone, source, column, label), f"{column}: dates read as midnight {timezone}"
    if pa.types.is_integer(kind):
        return _epoch(np.asarray(values, dtype=np.int64)), f"{column}: integer Unix epoch times"
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataError(
            f"{source}: column {column!r} has type {kind}, which is not a timestamp; "
            "give text, integer epoch or timestamp values, or map another column as the time column"
        )
    return _parse_text(values.cast(pa.string()), source, column, label, timezone, timestamp_format)


def _epoch(raw: np.ndarray) -> np.ndarray:
    magnitude = int(np.median(np.abs(raw))) if raw.size else 0
    for limit, factor, _unit in _EPOCH_UNITS:
        if magnitude < limit:
            return raw * factor
    return raw


def _parse_text(
    text: pa.Array, source: str, column: str, label: RowLabel, timezone: str, timestamp_format: str | None
) -> tuple[np.ndarray, str]:
    text = pc.utf8_trim_whitespace(text)
    if timestamp_format is None and pc.all(pc.match_substring_regex(text, r"^-?\d{9,19}$")).as_py():
        # Digits only and too long for %Y%m%d: Unix epoch times written as text (CSV).
        return _epoch(np.asarray(text.cast(pa.int64()))), f"{column}: integer Unix epoch times"
    has_time = np.asarray(pc.match_substring(text, ":"))
    if has_time.any():
        parts = pc.extract_regex(text, _SPLIT)
        unmatched = np.flatnonzero(np.asarray(parts.is_null()))
        if unmatched.size:
            _bad_text(source, label, column, text, int(unmatched[0]), timestamp_format)
        base, frac, offset = (parts.field(name) for name in ("base", "frac", "off"))
    else:
        base, frac, offset = text, None, None
    fmt = timestamp_format or _detect_format(base, source, column, label)
    parsed = pc.strptime(base, format=fmt, unit="ns", error_is_null=True)
    failed = np.flatnonzero(np.asarray(parsed.is_null()))
    if failed.size:
        _bad_text(source, label, column, text, int(failed[0]), fmt)
    _refuse_rolled_over(base, parsed, fmt, source, column, label, text)
    ns = np.asarray(parsed.cast(pa.int64()))
    if frac is not None:
        ns = ns + _fraction_ns(frac)
    if offset is not None:
        has_offset = np.asarray(pc.invert(pc.equal(offset, "")).fill_null(False))
        if has_offset.any():
            if not has_offset.all():
                i = int(np.flatnonzero(~has_offset)[0])
                raise DataError(
                    f"{source}: {label(i)}, column {column!r}: timestamp {text[i].as_py()!r} has no UTC offset "
                    "while other rows do. Give every row an offset (or none) and load again"
                )
            ns = ns - _offset_ns(offset)
            return ns, f"{column}: parsed with {fmt!r} and per-row UTC offsets (timezone setting not needed)"
    if timezone == "UTC":
        return ns, f"{column}: parsed with {fmt!r} as UTC"
    return _localize(pa.array(ns, pa.timestamp("ns")), timezone, source, column, label), f"{column}: parsed with {fmt!r} as {timezone} wall time"


def _detect_format(base: pa.Array, source: str, column: str, label: RowLabel) -> str:
    """The candidate that parses every row; if none does, the one parsing most rows (its first failure is the error)."""
    sample = base.slice(0, 200)
    survivors = [fmt for fmt in CANDIDATE_FORMATS if pc.strptime(sample, format=fmt, unit="ns", error_is_null=True).null_count < len(sample)]
    complete: dict[str, np.ndarray] = {}
    best, best_parsed = None, 0
    for fmt in survivors:
        parsed = pc.strptime(base, format=fmt, unit="ns", error_is_null=True)
        if parsed.null_count == 0:
            complete[fmt] = np.asarray(parsed.cast(pa.int64()))
        elif len(parsed) - parsed.null_count > best_parsed:
            best, best_parsed = fmt, len(parsed) - parsed.null_count
    if not complete:
        if best is None:
            first = base[0].as_py() if len(base) else ""
            raise DataError(
                f"{source}: {label(0)}, column {column!r}: cannot recognise the timestamp format of {first!r}. "
                "Pass timestamp_format= (strptime syntax, e.g. '%d.%m.%Y %H:%M:%S')"
            )
        return best  # the caller reports the first row this format cannot parse
    formats = list(complete)
    distinct = [fmt for fmt in formats if not np.array_equal(complete[fmt], complete[formats[0]])]
    if distinct:
        raise DataError(
            f"{source}: column {column!r}: timestamps are ambiguous, both {formats[0]!r} and {distinct[0]!r} parse "
            "every row with different results (day/month order). Pass timestamp_format= to say which"
        )
    return formats[0]


def _bad_text(source: str, label: RowLabel, column: str, text: pa.Array, index: int, fmt: str | None) -> None:
    hint = f"it does not match the format {fmt!r}" if fmt else "it is not a recognisable timestamp"
    raise DataError(
        f"{source}: {label(index)}, column {column!r}: cannot parse timestamp {text[index].as_py()!r}; {hint}. "
        "Correct that row, or pass timestamp_format= (strptime syntax) if the whole column uses another format"
    )


def _digit_runs(text: pa.Array) -> pa.Array:
    """The numbers in each string, without leading zeros, one space apart ("01/02/2017 3:04" -> "1 2 2017 3 4")."""
    runs = pc.replace_substring_regex(text, pattern=r"\D+", replacement=" ")
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(runs, pattern=r"(^| )0+(\d)", replacement=r"\1\2"))


def _refuse_rolled_over(
    base: pa.Array, parsed: pa.Array, fmt: str, source: str, column: str, label: RowLabel, text: pa.Array
) -> None:
    """A DataError at the first row whose parsed time, written back with ``fmt``, has other numbers than its text.

    Only the numbers are compared: ``strptime`` accepts "1/2/2017" for ``%m/%d/%Y`` and ``strftime`` writes
    "01/02/2017", and names (``%b``, ``%a``) come back in their own spelling. A rolled-over day or second
    changes a number, so it always shows. Writing back costs seconds per million rows, so only rows that can
    have rolled over are written back when the format holds only the usual directives: a day past the end of
    its month (31 at most, 28 days at least) lands on day 1, 2 or 3 of the next month, and a second 60 needs
    a "60" in the text.
    """
    directives = set(re.findall(r"%(.)", fmt))
    rows = np.arange(len(base))
    if directives <= _ROLL_DIRECTIVES:
        suspect = pc.or_(pc.less_equal(pc.day(parsed), 3), pc.match_substring(base, "60"))
        rows = np.flatnonzero(np.asarray(suspect))
        if not rows.size:
            return
    taken = pa.array(rows)
    try:
        written = pc.strftime(parsed.take(taken).cast(pa.timestamp("s")), format=fmt, locale="C")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # A user format with a directive arrow parses but cannot write back: there is nothing to compare
        # with, so its rows are taken as parsed (the candidate formats all write back).
        return
    same = np.asarray(pc.equal(_digit_runs(base.take(taken)), _digit_runs(written)).fill_null(False))
    if same.all():
        return
    index = int(rows[np.flatnonzero(~same)[0]])
    raise DataError(
        f"{source}: {label(index)}, column {column!r}: timestamp {text[index].as_py()!r} is not a calendar date or "
        f"time (a day past the end of its month, or a second 60); read with {fmt!r} it would silently become "
        f"{parsed[index].as_py()}. Correct that row and load again"
    )


def _fraction_ns(frac: pa.Array) -> np.ndarray:
    digits = pc.utf8_slice_codeunits(frac.fill_null(".0"), 1)
    return np.asarray(pc.utf8_rpad(digits, 9, "0").cast(pa.int64()))


def _offset_ns(offset: pa.Array) -> np.ndarray:
    text = pc.replace_substring(pc.replace_substring(offset, ":", ""), "UTC", "+0000")
    text = pc.replace_substring(text, "Z", "+0000")
    sign = np.where(np.asarray(pc.starts_with(text, "-")), -1, 1)
    hours = np.asarray(pc.utf8_slice_codeunits(text, 1, 3).cast(pa.int64()))
    minutes = np.asarray(pc.utf8_slice_codeunits(text, 3, 5).cast(pa.int64()))
    return sign * (hours * 3600 + minutes * 60) * 10**9


def _localize(naive: pa.Array, timezone: str, source: str, column: str, label: RowLabel) -> np.ndarray:
    if timezone == "UTC":
        return np.asarray(naive.cast(pa.int64()))
    try:
        aware = pc.assume_timezone(naive, timezone, ambiguous="raise", nonexistent="raise")
    except pa.ArrowInvalid:
        index = _first_bad_local(naive, timezone)
        raise DataError(
            f"{source}: {label(index)}, column {column!r}: wall time {naive[index].as_py()} does not exist or is "
            f"ambiguous in {timezone} (a daylight-saving change). Export the data with UTC offsets, or in UTC"
        ) from None
    return np.asarray(aware.cast(pa.int64()))


def _first_bad_local(naive: pa.Array, timezone: str) -> int:
    """Bisect for the first row the timezone rejects (only runs on the error path)."""
    low, high = 0, len(naive)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            pc.assume_timezone(naive.slice(low, middle - low), timezone, ambiguous="raise", nonexistent="raise")
            low = middle
        except pa.ArrowInvalid:
            high = middle
    return low
