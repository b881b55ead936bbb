"""CSV and Parquet OHLCV files.

Both readers detect (or take) the column roles, parse timestamps with explicit
timezone handling, convert prices to float64 and hand everything to
:func:`~foxhunt.data.assemble.build_market` for validation. CSV errors name the
data row and the line of the text file (the header is line 1; line numbers assume
one record per line, i.e. no quoted line breaks); Parquet errors name the row.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.parquet as pq

from foxhunt.data.assemble import build_market
from foxhunt.data.columns import ColumnMap, resolve_columns
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.market import OHLCV, MarketData
from foxhunt.data.timeparse import parse_timestamps
from foxhunt.data.validate import RowLabel, csv_row_label, plain_row_label
from foxhunt.errors import DataError

__all__ = ["load_csv", "load_parquet"]


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _read_header(path: Path) -> list[str]:
    try:
        with _open_text(path) as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"{path}: cannot read the file ({error}). Check the path and that it is UTF-8 CSV text") from None
    if not header:
        raise DataError(f"{path}: line 1: the file is empty; a CSV needs a header line and data rows")
    return [name.strip() for name in header]


def _line_of(path: Path, text: str) -> int:
    """Line number (1-based) of the first line equal to ``text``; used only to word an error."""
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if line.rstrip("\r\n") == text:
                return number
    return 0


def _numeric(source: str, values: pa.Array, column: str, label: RowLabel) -> np.ndarray:
    """float64 values, NaN where empty; a DataError at the first cell that is not a number."""
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_decimal(values.type):
        return np.asarray(values.cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
    if pa.types.is_null(values.type):
        return np.full(len(values), np.nan)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise DataError(f"{source}: column {column!r} has type {values.type}; prices and volume must be numbers")
    text = pc.utf8_trim_whitespace(values)
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
    try:
        return np.asarray(text.cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
    except pa.ArrowInvalid:
        for index, cell in enumerate(text.to_pylist()):
            try:
                float(cell if cell is not None else "nan")
            except ValueError:
                raise DataError(
                    f"{source}: {label(index)}, column {column!r}: {cell!r} is not a number. Correct that cell and load again"
                ) from None
        raise


def _assemble(
    source: str,
    table: pa.Table,
    columns: ColumnMap,
    label: RowLabel,
    *,
    timezone: str,
    timestamp_format: str | None,
    instrument: InstrumentSpec | str | None,
    duplicates: str,
) -> MarketData:
    if len(columns.time) == 2:
        time_values = pc.binary_join_element_wise(table[columns.time[0]], table[columns.time[1]], " ")
    else:
        time_values = table[columns.time[0]]
    ns, how = parse_timestamps(
        time_values, source=source, column=columns.time_label, label=label, timezone=timezone, timestamp_format=timestamp_format
    )
    ohlcv = np.zeros((table.num_rows, OHLCV.size()), dtype=np.float64)
    names = columns.ohlcv_names()
    notes = [how]
    for field in OHLCV:
        if field == OHLCV.VOLUME and columns.volume is None:
            notes.append("no volume column (mapped to None): volume is zero")
            continue
        ohlcv[:, field] = _numeric(source, table[names[field]].combine_chunks(), names[field], label)
    return build_market(
        source, ns, ohlcv, names=names, time_column=columns.time_label, label=label,
        instrument=instrument, notes=notes, duplicates=duplicates,
    )


def load_csv(
    path: str | os.PathLike,
    columns: Mapping[str, str | None] | None = None,
    timezone: str = "UTC",
    timestamp_format: str | None = None,
    instrument: InstrumentSpec | str | None = None,
    duplicates: str = "error",
) -> MarketData:
    """Load an OHLCV CSV (optionally ``.gz``); see docs/data.md for detection and validation rules.

    ``columns`` maps roles (time, open, high, low, close, volume) to header names;
    ``timezone`` is the IANA zone of naive timestamps; ``timestamp_format`` is a
    strptime format for the time column (detected when None); ``instrument`` is a
    spec or preset name; ``duplicates`` is "error" or "drop_identical".
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise DataError(f"{source}: no such file. Check the path (relative paths are taken from the working directory)")
    header = _read_header(path)
    colmap = resolve_columns(source, header, columns)
    bad_rows: list[str] = []

    def on_invalid(row: pv.InvalidRow) -> str:
        bad_rows.append(row.text)
        return "skip"

    try:
        table = pv.read_csv(
            path,
            parse_options=pv.ParseOptions(invalid_row_handler=on_invalid, ignore_empty_lines=False),
            convert_options=pv.ConvertOptions(
                include_columns=colmap.needed,
                column_types={name: pa.string() for name in colmap.needed},
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, OSError) as error:
        raise DataError(f"{source}: cannot parse as CSV ({error}). Check the delimiter is ',' and the file is not truncated") from None
    if bad_rows:
        line = _line_of(path, bad_rows[0])
        where = f"line {line}" if line else "a line"
        raise DataError(
            f"{source}: {where}: {bad_rows[0]!r} has a different number of fields than the header's {len(header)} "
            f"(columns {header}). Fix that line and load again"
        )
    table = _strip_trailing_blank_rows(table)
    return _assemble(
        source, table, colmap, csv_row_label(1),
        timezone=timezone, timestamp_format=timestamp_format, instrument=instrument, duplicates=duplicates,
    )


def _strip_trailing_blank_rows(table: pa.Table) -> pa.Table:
    """Blank lines at the very end of a file are formatting, not rows; blank lines inside are errors."""
    blank = np.ones(table.num_rows, dtype=bool)
    for column in table.columns:
        blank &= np.asarray(pc.equal(pc.utf8_trim_whitespace(column), ""))
    keep = table.num_rows
    while keep > 0 and blank[keep - 1]:
        keep -= 1
    return table.slice(0, keep)


def load_parquet(
    path: str | os.PathLike,
    columns: Mapping[str, str | None] | None = None,
    timezone: str = "UTC",
    timestamp_format: str | None = None,
    instrument: InstrumentSpec | str | None = None,
    duplicates: str = "error",
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
        table = pq.read_table(path, columns=colmap.needed)
    except (pa.ArrowInvalid, OSError) as error:
        raise DataError(f"{source}: cannot read as Parquet ({error}). Check the file is a complete Parquet file") from None
    return _assemble(
        source, table, colmap, plain_row_label("row"),
        timezone=timezone, timestamp_format=timestamp_format, instrument=instrument, duplicates=duplicates,
    )
