"""CSV and Parquet OHLCV files.

Both readers detect (or take) the column roles, parse timestamps with explicit
timezone handling, convert prices to float64 and hand everything to
:func:`~foxhunt.data.assemble.build_market` for validation. CSV errors name the
data row and the line of the text file (the header is line 1; line numbers assume
one record per line, i.e. no quoted line breaks); Parquet errors name the row.
"""

from __future__ import annotations

import codecs
import gzip
import os
import re
import zlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.parquet as pq

from foxhunt.data.assemble import build_market
from foxhunt.data.columns import ColumnMap, resolve_columns
from foxhunt.data.hints import set_option
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.layout import TextLayout, open_text, sniff_text
from foxhunt.data.market import OHLCV, MarketData
from foxhunt.data.missing import MISSING_MARKERS
from foxhunt.data.timeparse import parse_timestamps
from foxhunt.data.validate import RowLabel, csv_row_label, plain_row_label
from foxhunt.errors import DataError

__all__ = ["load_csv", "load_parquet"]


def _require_utf8_text(path: Path) -> None:
    """A DataError naming the line and byte of the first bytes that are not UTF-8, read a megabyte at a time.

    Arrow's CSV reader does not check: text that is not UTF-8 reached its invalid-row callback, which failed to
    decode the row and printed a traceback on stderr ("Exception ignored in ..."), before the load failed anyway.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines = 0
    try:
        with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as error:
                    # error.object is what was decoded: bytes held back from the chunk before (part of one
                    # character, no newline) and this chunk.
                    line = lines + error.object.count(b"\n", 0, error.start) + 1
                    raise DataError(
                        f"{path}: line {line}: byte {error.object[error.start]:#04x} is not UTF-8 text, and a CSV must be UTF-8. "
                        "Save the file as UTF-8 and load again"
                    ) from None
                lines += chunk.count(b"\n")
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise DataError(f"{path}: line {lines + 1}: the file ends inside a character, so it is not UTF-8 text") from None
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(f"{path}: cannot read the file ({error}). Check the path and that the file is complete") from None


def _line_of(path: Path, text: str) -> int:
    """Line number (1-based) of the first line equal to ``text``; used only to word an error."""
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if line.rstrip("\r\n") == text:
                    return number
    except (OSError, UnicodeDecodeError, EOFError, zlib.error):
        pass  # the error being worded says which line it can; without a number it says "a line"
    return 0


def _first_unparsable(text: pa.Array) -> int:
    """Index of the first cell arrow cannot read as a number, by bisection (only on the error path).

    Arrow says that a cell failed, not which; Python's ``float`` cannot stand in for it, as it reads cells
    arrow refuses ("1_000", non-ASCII digits).
    """
    low, high = 0, len(text)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            text.slice(low, middle - low).cast(pa.float64())
            low = middle
        except pa.ArrowInvalid:
            high = middle
    return low


def _numeric_into(
    out: np.ndarray, values: pa.ChunkedArray, source: str, column: str, label: RowLabel, decimal: str = "."
) -> None:
    """Write a column into ``out`` (a strided column of the result) as float64, NaN where empty, a chunk at a time.

    A chunk at a time so that no whole-column float64 or text copy exists next to the result. A DataError
    names the first cell that is not a number.
    """
    start = 0
    for chunk in values.chunks:
        if pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_decode()
        stop = start + len(chunk)
        out[start:stop] = _numeric(source, chunk, column, _shifted(label, start), decimal)
        start = stop


def _release() -> None:
    """Hand the memory of the columns just dropped back to the system.

    Arrow's allocator keeps freed memory for reuse; this loader does not reuse it (the arrays that follow are
    numpy's), so without this a large file's text stayed in the process for the rest of the load.
    """
    pa.default_memory_pool().release_unused()


def _shifted(label: RowLabel, start: int) -> RowLabel:
    return lambda index: label(start + index)


def _numeric(source: str, values: pa.Array, column: str, label: RowLabel, decimal: str = ".") -> np.ndarray:
    """float64 values, NaN where empty or a missing marker; a DataError at the first cell that is not a number."""
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_decimal(values.type):
        try:
            return np.asarray(values.cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
        except pa.ArrowInvalid as error:  # a decimal beyond float64
            raise DataError(f"{source}: column {column!r}: {error}; prices and volume must be float64 numbers") from None
    if pa.types.is_null(values.type):
        return np.full(len(values), np.nan)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise DataError(f"{source}: column {column!r} has type {values.type}; prices and volume must be numbers")
    text = pc.utf8_trim_whitespace(values)
    text = pc.if_else(pc.is_in(text, value_set=pa.array(MISSING_MARKERS, values.type)), pa.scalar(None, values.type), text)
    shown = text
    if decimal == ",":
        text = pc.replace_substring(text, ",", ".")
    try:
        return np.asarray(text.cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
    except pa.ArrowInvalid:
        index = _first_unparsable(text)
        cell = shown[index].as_py()
        hint = (
            f"; if the file writes decimal commas, load with {set_option('decimal', ',')}"
            if decimal == "." and "," in cell else ""
        )
        raise DataError(
            f"{source}: {label(index)}, column {column!r}: {cell!r} is not a number{hint}. Correct that cell and load again"
        ) from None


_CLOSE_ONLY = (
    "close-only series: open, high and low are set to the close. "
    "That costs the intrabar information: a market order fills at the next bar's close, a limit order fills only "
    "when the next close passes through its price (the bar's range is unknown), and spread and slippage costs apply "
    "to closes alone"
)


def _assemble(
    source: str,
    table: dict[str, pa.ChunkedArray],
    rows: int,
    columns: ColumnMap,
    label: RowLabel,
    *,
    timezone: str,
    timestamp_format: str | None,
    instrument: InstrumentSpec | str | None,
    duplicates: str,
    missing: str,
    layout: str,
    notes: tuple[str, ...] = (),
    decimal: str = ".",
) -> MarketData:
    """Parse the columns of ``table`` into bars, dropping each column from it once it is read.

    ``table`` is the only reference to the file's columns (the caller keeps none), so each column's memory
    goes back as soon as it is converted: at most one column's text or numbers exists next to the result.
    A close-only series reads its close once and copies it into open, high and low.
    """
    names = columns.ohlcv_names()
    read = {field: names[field] for field in OHLCV if not (field == OHLCV.VOLUME and columns.volume is None)}
    if columns.close_only:
        read = {field: name for field, name in read.items() if field in (OHLCV.CLOSE, OHLCV.VOLUME)}
    uses = Counter([*columns.time, *read.values()])

    def take(name: str) -> pa.ChunkedArray:
        uses[name] -= 1
        return table[name] if uses[name] else table.pop(name)

    if len(columns.time) == 2:
        time_values = pc.binary_join_element_wise(take(columns.time[0]), take(columns.time[1]), " ")
    else:
        time_values = take(columns.time[0])
    ns, how = parse_timestamps(
        time_values, source=source, column=columns.time_label, label=label, timezone=timezone, timestamp_format=timestamp_format
    )
    del time_values
    _release()
    ohlcv = np.zeros((rows, OHLCV.size()), dtype=np.float64)
    notes = list(notes)
    if columns.close_only:
        notes.append(_CLOSE_ONLY)
        layout += ", close-only series (a time and one value column, as FRED writes)"
    if columns.volume is None:
        notes.append("no volume column: volume is zero")
    for field, name in read.items():
        _numeric_into(ohlcv[:, field], take(name), source, name, label, decimal)
    if columns.close_only:
        ohlcv[:, [OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW]] = ohlcv[:, [OHLCV.CLOSE]]
    _release()
    return build_market(
        source, ns, ohlcv, names=names, time_column=columns.time_label, label=label,
        instrument=instrument, notes=notes, duplicates=duplicates, missing=missing,
        layout=layout, columns=columns.roles(), time_note=how,
    )


def load_csv(
    path: str | os.PathLike,
    columns: Mapping[str, str | None] | None = None,
    timezone: str = "UTC",
    timestamp_format: str | None = None,
    instrument: InstrumentSpec | str | None = None,
    duplicates: str = "error",
    missing: str = "drop_empty",
    delimiter: str | None = None,
    decimal: str | None = None,
) -> MarketData:
    """Load a text file of bars (optionally ``.gz``); see docs/data.md for the layouts, detection and validation.

    ``columns`` maps roles (time, open, high, low, close, volume) to column names;
    ``timezone`` is the IANA zone of naive timestamps; ``timestamp_format`` is a
    strptime format for the time column (detected when None); ``instrument`` is a
    spec or preset name; ``duplicates`` is "error" or "drop_identical"; ``missing``
    is "drop_empty", "drop" or "error" (:mod:`foxhunt.data.missing`);
    ``delimiter`` and ``decimal`` are detected when None (:mod:`foxhunt.data.layout`).
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise DataError(f"{source}: no such file. Check the path (relative paths are taken from the working directory)")
    _require_utf8_text(path)
    layout = sniff_text(path, source, delimiter=delimiter, decimal=decimal)
    if layout.unrecognised and not columns:
        raise DataError(layout.unrecognised)
    where = f"header (line {layout.skip_lines + 1})" if layout.header else f"no header ({layout.kind})"
    colmap = resolve_columns(source, layout.names, {**layout.defaults, **(columns or {})}, where=where)
    try:
        table = _read_csv(path, source, layout, colmap, typed=True)
    except _NotNumbers:
        # A cell arrow could not read as a number: read every column as text, which finds and names that cell
        # (and reads numbers padded with spaces, which the typed reader refuses).
        table = _read_csv(path, source, layout, colmap, typed=False)
    rows = _rows_before_trailing_blanks(table)
    columns_of = {name: table.column(name).slice(0, rows) for name in dict.fromkeys(colmap.needed)}
    del table
    return _assemble(
        source, columns_of, rows, colmap, csv_row_label(layout.header_lines),
        timezone=timezone, timestamp_format=timestamp_format, instrument=instrument, duplicates=duplicates,
        missing=missing, layout=layout.kind, notes=layout.notes, decimal=layout.decimal,
    )


def _require_utf8(source: str, name: str, column: pa.ChunkedArray) -> None:
    """Parquet text is read without checking its UTF-8 (a CSV's is checked by the reader): check it once here.

    Arrow's text functions refuse invalid UTF-8 mid-computation, and Python cannot show such a cell in a message.
    """
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return
    start = 0
    for chunk in column.chunks:
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid as error:
            index = re.search(r"index (\d+)", str(error))
            where = f"row {start + int(index.group(1)) + 1}, " if index else ""
            raise DataError(f"{source}: {where}column {name!r}: text that is not UTF-8 ({error}). Write the column as UTF-8 text") from None
        start += len(chunk)


class _NotNumbers(Exception):
    """The typed read met a cell that is not a number (private: load_csv then reads text)."""


def _read_csv(path: Path, source: str, layout: TextLayout, colmap: ColumnMap, *, typed: bool) -> pa.Table:
    """The needed columns only: times as text, prices and volume as float64 (``typed``) or text.

    Reading numbers as float64 straight away, rather than text then a cast, keeps the file's text out of
    memory: the text of the numbers was most of a large file's peak (docs/data.md, "Memory").
    """
    bad_rows: list[str] = []

    def on_invalid(row: pv.InvalidRow) -> str:
        bad_rows.append(row.text)
        return "skip"

    numeric = pa.float64() if typed else pa.string()
    types = {name: numeric for name in colmap.needed}
    types.update({name: pa.string() for name in colmap.time})
    try:
        table = pv.read_csv(
            path,
            # The layout's names, never the file's own header: the sniffer strips each name of white space
            # (a header cell of '\x0c' is the name ''), and pyarrow must look the needed columns up by those.
            read_options=pv.ReadOptions(
                skip_rows=layout.skip_lines + (1 if layout.header else 0), column_names=list(layout.names)
            ),
            parse_options=pv.ParseOptions(
                delimiter=layout.delimiter, invalid_row_handler=on_invalid, ignore_empty_lines=False
            ),
            convert_options=pv.ConvertOptions(
                include_columns=list(dict.fromkeys(colmap.needed)),
                column_types=types,
                null_values=list(MISSING_MARKERS),
                strings_can_be_null=False,
                decimal_point=layout.decimal,
            ),
        )
    except (pa.ArrowInvalid, OSError) as error:
        if typed and "conversion error" in str(error):
            raise _NotNumbers() from None
        raise DataError(
            f"{source}: cannot parse as CSV with {layout.delimiter!r} between fields ({error}). Check the file is not "
            f"truncated; if another separator is right, give it, e.g. {set_option('delimiter', ';')}"
        ) from None
    if bad_rows:
        line = _line_of(path, bad_rows[0])
        where = f"line {line}" if line else "a line"
        raise DataError(
            f"{source}: {where}: {bad_rows[0]!r} has a different number of fields than the {len(layout.names)} of "
            f"{'the header' if layout.header else 'the first row'} (columns {list(layout.names)}). Fix that line and load again"
        )
    return table


def _rows_before_trailing_blanks(table: pa.Table) -> int:
    """Rows up to the last that is not blank: blank lines at the very end of a file are formatting, not rows.

    Blank lines inside are errors (later). Only the tail is looked at, a few rows at a time, so the check costs
    nothing on a large file.
    """
    keep = table.num_rows
    while keep > 0:
        tail = table.slice(max(0, keep - 64), min(64, keep))
        blank = np.ones(tail.num_rows, dtype=bool)
        for column in tail.columns:
            if pa.types.is_string(column.type):
                blank &= np.asarray(pc.equal(pc.utf8_trim_whitespace(column), "").fill_null(True))
            else:
                blank &= np.asarray(column.is_null())
        written = np.flatnonzero(~blank)
        if written.size:
            return keep - tail.num_rows + int(written[-1]) + 1
        keep -= tail.num_rows
    return 0


def load_parquet(
    path: str | os.PathLike,
    columns: Mapping[str, str | None] | None = None,
    timezone: str = "UTC",
    timestamp_format: str | None = None,
    instrument: InstrumentSpec | str | None = None,
    duplicates: str = "error",
    missing: str = "drop_empty",
) -> MarketData:
    """Load an OHLCV Parquet file; same arguments and rules as :func:`load_csv`, errors name 1-based rows.

    A timestamp column with a timezone is exact; a naive one is read in ``timezone``.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise DataError(f"{source}: no such file. Check the path (relative paths are taken from the working directory)")
    try:
        schema = pq.read_schema(path)
        colmap = resolve_columns(source, schema.names, columns, where="schema")
        table = pq.read_table(path, columns=list(dict.fromkeys(colmap.needed)))
    except (pa.ArrowException, OSError, UnicodeDecodeError) as error:
        # UnicodeDecodeError: a damaged schema whose column names are not UTF-8 (pyarrow decodes them itself).
        raise DataError(f"{source}: cannot read as Parquet ({error}). Check the file is a complete Parquet file") from None
    rows = table.num_rows
    columns_of = {name: table.column(name) for name in dict.fromkeys(colmap.needed)}
    del table
    for name, column in columns_of.items():
        _require_utf8(source, name, column)
    return _assemble(
        source, columns_of, rows, colmap, plain_row_label("row"),
        timezone=timezone, timestamp_format=timestamp_format, instrument=instrument, duplicates=duplicates,
        missing=missing, layout="Parquet",
    )
