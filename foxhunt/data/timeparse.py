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
Integer columns are Unix epoch times (:mod:`foxhunt.data.epoch`). Text is parsed :data:`CHUNK_ROWS` rows at a time.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from foxhunt.data.epoch import EPOCH_TEXT, epoch_note, epoch_text_to_int64, epoch_to_ns, integers_to_int64
from foxhunt.data.hints import set_option
from foxhunt.data.validate import RowLabel
from foxhunt.errors import DataError

__all__ = ["CANDIDATE_FORMATS", "CHUNK_ROWS", "parse_timestamps", "check_timezone"]

# Rows of text parsed at a time: a slice's temporaries (trimmed text, its parts, parsed times) are a few tens of MB
# however long the file is, where parsing the whole column at once held several copies of it (docs/data.md, "Memory").
CHUNK_ROWS = 1 << 18

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
# Directives whose overflow can only roll a day into the next month's first three days or a second 60 into the
# next minute (see _refuse_rolled_over); any other directive in a format has every row checked.
_ROLL_DIRECTIVES = frozenset("YmdHMSyIpbBaAe%")


def check_timezone(timezone: str) -> str:
    """The timezone name if the tz database knows it; a DataError saying so otherwise."""
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise DataError(
            f"unknown timezone {timezone!r}; use an IANA name such as 'UTC', 'Europe/London' or 'America/New_York', "
            f"e.g. {set_option('timezone', 'America/New_York')}"
        ) from None
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
    check_timezone(timezone)
    if isinstance(values, pa.Array):
        values = pa.chunked_array([values])
    if pa.types.is_dictionary(values.type):  # a Parquet column written from a pandas category
        values = pa.chunked_array([chunk.dictionary_decode() for chunk in values.chunks], values.type.value_type)
    if values.null_count:
        nulls = np.flatnonzero(np.asarray(values.is_null()))
        raise DataError(f"{source}: {label(int(nulls[0]))}, column {column!r}: timestamp is empty. Fill in or remove that row")
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        # Text stays in the file's chunks: it is parsed a slice at a time, and one combined copy of a large
        # file's time column was as large as all its bars.
        return _parse_text(values, source, column, label, timezone, timestamp_format)
    values = values.combine_chunks()
    if pa.types.is_timestamp(kind):
        ns = _to_ns(values, pa.timestamp("ns", kind.tz), source, column, label)
        if kind.tz is None:
            return _localize(ns, timezone, source, column, label), f"{column}: naive timestamps read as {timezone}"
        return np.asarray(ns.cast(pa.int64())), f"{column}: timestamps carry timezone {kind.tz}"
    if pa.types.is_date(kind):
        ns = _to_ns(values, pa.timestamp("ns"), source, column, label)
        return _localize(ns, timezone, source, column, label), f"{column}: dates read as midnight {timezone}"
    if pa.types.is_integer(kind):
        raw = integers_to_int64(values, source=source, column=column, label=label)
        return epoch_to_ns(raw, source=source, column=column, label=label), f"{column}: {epoch_note(raw)}"
    raise DataError(
        f"{source}: column {column!r} has type {kind}, which is not a timestamp; "
        "give text, integer epoch or timestamp values, or map another column as the time column"
    )


def _to_ns(values: pa.Array, target: pa.DataType, source: str, column: str, label: RowLabel) -> pa.Array:
    """Timestamps or dates as nanosecond timestamps; a value outside 1677-2262 is an error naming its row."""
    try:
        return values.cast(target)
    except pa.ArrowInvalid:
        # Arrow refuses the cast without saying which row: find the first value whose nanoseconds overflow int64.
        seconds = np.asarray(values.cast(pa.timestamp("s", getattr(values.type, "tz", None))).cast(pa.int64()))
        bad = np.flatnonzero(np.abs(seconds) > np.iinfo(np.int64).max // 10**9)
        index = int(bad[0]) if bad.size else 0
        raise DataError(
            f"{source}: {label(index)}, column {column!r}: timestamp {values[index].as_py()} is outside the range "
            "foxhunt's nanosecond timestamps hold (1677-09-21 to 2262-04-11). Correct that row and load again"
        ) from None


def _shifted(label: RowLabel, start: int) -> RowLabel:
    return lambda index: label(start + index)


def _pieces(text: pa.ChunkedArray) -> Iterator[tuple[int, pa.Array]]:
    """Slices of at most :data:`CHUNK_ROWS` rows as plain string arrays, with their first row's index.

    Made one at a time: only the slice being parsed is ever copied out of the file's chunks.
    """
    for start in range(0, max(len(text), 1), CHUNK_ROWS):
        yield start, text.slice(start, CHUNK_ROWS).combine_chunks().cast(pa.string())


def _parse_text(
    text: pa.ChunkedArray, source: str, column: str, label: RowLabel, timezone: str, timestamp_format: str | None
) -> tuple[np.ndarray, str]:
    """Text timestamps, parsed a slice at a time so that a large file's temporaries stay small.

    What holds for the whole column is decided first (epoch digits, whether times are written, the format);
    each slice is then parsed into its part of the result, and its errors name rows of the whole file.
    """
    if timestamp_format is None and all(
        pc.all(pc.match_substring_regex(pc.utf8_trim_whitespace(piece), EPOCH_TEXT)).as_py() for _, piece in _pieces(text)
    ):
        raw = np.empty(len(text), dtype=np.int64)
        for start, piece in _pieces(text):
            raw[start : start + len(piece)] = epoch_text_to_int64(
                pc.utf8_trim_whitespace(piece), source=source, column=column, label=_shifted(label, start)
            )
        # One unit for the whole column, from its median: decided over every row, not per slice.
        return epoch_to_ns(raw, source=source, column=column, label=label), f"{column}: {epoch_note(raw)}"
    has_time = any(pc.any(pc.match_substring(piece, ":")).as_py() for _, piece in _pieces(text))

    def split(start: int, piece: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array | None, pa.Array | None]:
        trimmed = pc.utf8_trim_whitespace(piece)
        if not has_time:
            return trimmed, trimmed, None, None
        parts = pc.extract_regex(trimmed, _SPLIT)
        unmatched = np.flatnonzero(np.asarray(parts.is_null()))
        if unmatched.size:
            _bad_text(source, _shifted(label, start), column, trimmed, int(unmatched[0]), timestamp_format)
        return trimmed, parts.field("base"), parts.field("frac"), parts.field("off")

    fmt = timestamp_format or _detect_format(text, split, source, column, label)
    ns = np.empty(len(text), dtype=np.int64)
    with_offset = False
    first_without: int | None = None
    for start, piece in _pieces(text):
        trimmed, base, frac, offset = split(start, piece)
        rows = _shifted(label, start)
        parsed = pc.strptime(base, format=fmt, unit="ns", error_is_null=True)
        failed = np.flatnonzero(np.asarray(parsed.is_null()))
        if failed.size:
            _bad_text(source, rows, column, trimmed, int(failed[0]), fmt)
        _refuse_rolled_over(base, parsed, fmt, source, column, rows, trimmed)
        part = np.asarray(parsed.cast(pa.int64()))
        if frac is not None:
            part = part + _fraction_ns(frac)
        if offset is not None:
            has_offset = np.asarray(pc.invert(pc.equal(offset, "")).fill_null(False))
            if has_offset.any():
                with_offset = True
                part = part - _offset_ns(offset, source, column, rows, trimmed)
            if not has_offset.all() and first_without is None:
                first_without = start + int(np.flatnonzero(~has_offset)[0])
        ns[start : start + len(piece)] = part
        pa.default_memory_pool().release_unused()
    if with_offset:
        if first_without is not None:
            raise DataError(
                f"{source}: {label(first_without)}, column {column!r}: timestamp {text[first_without].as_py().strip()!r} "
                "has no UTC offset while other rows do. Give every row an offset (or none) and load again"
            )
        return ns, f"{column}: parsed with {fmt!r} and per-row UTC offsets (timezone setting not needed)"
    if timezone == "UTC":
        return ns, f"{column}: parsed with {fmt!r}; no UTC offset written, so read as UTC (data.timezone)"
    note = f"{column}: parsed with {fmt!r}; no UTC offset written, so read as {timezone} wall time (data.timezone)"
    return _localize(pa.array(ns, pa.timestamp("ns")), timezone, source, column, label), note


def _detect_format(text: pa.ChunkedArray, split, source: str, column: str, label: RowLabel) -> str:
    """The candidate that parses every row; if none does, the one parsing most rows (its first failure is the error).

    Candidates are first narrowed on the column's first 200 rows (a format that parses none of them cannot parse
    every row). Two formats that both parse every row must agree on every row, or the column is ambiguous.
    """
    first = split(*next(_pieces(text)))[1]
    sample = first.slice(0, 200)
    survivors = [
        fmt for fmt in CANDIDATE_FORMATS
        if pc.strptime(sample, format=fmt, unit="ns", error_is_null=True).null_count < len(sample)
    ]
    if not survivors:
        shown = first[0].as_py() if len(first) else ""
        raise DataError(
            f"{source}: {label(0)}, column {column!r}: cannot recognise the timestamp format of {shown!r}. "
            "Give its strptime format, e.g. " + set_option("timestamp_format", "%d.%m.%Y %H:%M:%S")
        )
    if len(survivors) == 1:
        return survivors[0]  # complete or not, it is the choice; parsing reports its first failure
    parsed_rows = dict.fromkeys(survivors, 0)
    complete = set(survivors)
    differs: set[tuple[str, str]] = set()
    for start, piece in _pieces(text):
        base = split(start, piece)[1]
        results = {}
        for fmt in survivors:
            parsed = pc.strptime(base, format=fmt, unit="ns", error_is_null=True)
            parsed_rows[fmt] += len(parsed) - parsed.null_count
            if parsed.null_count:
                complete.discard(fmt)
            elif fmt in complete:
                results[fmt] = np.asarray(parsed.cast(pa.int64()))
        for a in results:
            for b in results:
                if a < b and not np.array_equal(results[a], results[b]):
                    differs.add((a, b))
    formats = [fmt for fmt in survivors if fmt in complete]
    if not formats:
        return max(survivors, key=lambda fmt: parsed_rows[fmt])  # the first of the most parsed rows
    distinct = [fmt for fmt in formats[1:] if tuple(sorted((formats[0], fmt))) in differs]
    if distinct:
        raise DataError(
            f"{source}: column {column!r}: timestamps are ambiguous, both {formats[0]!r} and {distinct[0]!r} parse "
            f"every row with different results (day/month order). Say which with {set_option('timestamp_format', formats[0])} "
            f"or {set_option('timestamp_format', distinct[0])}"
        )
    return formats[0]


def _bad_text(source: str, label: RowLabel, column: str, text: pa.Array, index: int, fmt: str | None) -> None:
    hint = f"it does not match the format {fmt!r}" if fmt else "it is not a recognisable timestamp"
    raise DataError(
        f"{source}: {label(index)}, column {column!r}: cannot parse timestamp {text[index].as_py()!r}; {hint}. "
        "Correct that row, or if the whole column uses another format give it in strptime syntax, e.g. "
        + set_option("timestamp_format", "%d.%m.%Y %H:%M:%S")
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


def _offset_ns(offset: pa.Array, source: str, column: str, label: RowLabel, text: pa.Array) -> np.ndarray:
    """UTC offsets in nanoseconds (an empty offset is 0); hours past 23 or minutes past 59 are an error naming the row.

    The pattern admits any two digits, and "+99:99" would shift a bar by four days without a word.
    """
    text_offset = pc.replace_substring(pc.replace_substring(offset.fill_null(""), ":", ""), "UTC", "+0000")
    text_offset = pc.replace_substring(text_offset, "Z", "+0000")
    text_offset = pc.if_else(pc.equal(text_offset, ""), "+0000", text_offset)
    sign = np.where(np.asarray(pc.starts_with(text_offset, "-")), -1, 1)
    hours = np.asarray(pc.utf8_slice_codeunits(text_offset, 1, 3).cast(pa.int64()))
    minutes = np.asarray(pc.utf8_slice_codeunits(text_offset, 3, 5).cast(pa.int64()))
    bad = np.flatnonzero((hours > 23) | (minutes > 59))
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"{source}: {label(i)}, column {column!r}: timestamp {text[i].as_py()!r} has the UTC offset "
            f"{offset[i].as_py()!r}, which is not an offset (hours 00-23, minutes 00-59). Correct that row and load again"
        )
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
            f"ambiguous in {timezone} (a daylight-saving change), the zone data.timezone gives naive times. Export the "
            "data with UTC offsets, or in UTC and load it without data.timezone"
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
