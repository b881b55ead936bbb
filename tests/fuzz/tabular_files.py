"""Valid CSV and Parquet files of bars, and structured mutations of them, for the fuzzing suite.

CSV: header spellings, date formats, epoch times and offsets of real exports; mutations of the table of
cells (columns swapped, deleted, duplicated or renamed; cells set to NaN, inf, negative, huge, tiny or
text; rows swapped, duplicated, deleted, blank, with a field more or less); written quoted or not, with
either line ending, in UTF-8, with a byte-order mark or in another encoding, plain or gzip, then maybe
damaged byte by byte. Parquet: every time column type (text, timestamps of each unit and zone, dates,
integer epochs) and numeric type, mutations of the table (nulls, special values, names swapped,
columns deleted, duplicated or retyped to binary, bool, null, list, struct, dictionary or duration,
rows reordered or duplicated), then maybe damaged byte by byte.
"""

from __future__ import annotations

import csv
import datetime
import gzip
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fuzz_inputs import Bars, bars, byte_damage, damage, encodings
from hypothesis import assume
from hypothesis import strategies as st

from foxhunt.data import OHLCV

__all__ = ["TIMEZONES", "csv_files", "parquet_files"]

HEADERS = {
    "time": ["time", "Time", "DATE", "timestamp", "Datetime", "Gmt time", "ts_event", "date_time"],
    "open": ["open", "Open", "o", "OPEN"],
    "high": ["high", "High", "h"],
    "low": ["low", "Low", "l"],
    "close": ["close", "Close", "c", "last"],
    "volume": ["volume", "Volume", "vol", "v"],
}
TIME_FORMATS = [
    "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S+00:00", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%S.%f",
    "%d.%m.%Y %H:%M:%S", "%m/%d/%Y %H:%M", "%Y%m%d %H:%M:%S", "%Y.%m.%d", "epoch_s", "epoch_ms", "epoch_ns",
]  # fmt: skip
BAD_CELLS = [
    "", " ", "nan", "NaN", "inf", "-inf", "Infinity", "-1", "0", "-0", "1e308", "1e-320", "1e400", "3.5e38", "abc",
    "1_0", "\u0661", "0x10", "+1", "1,5", "9" * 400, "NULL", "N/A", '"', "1e", ".", "--1",
]  # fmt: skip
BAD_TIMES = [
    "2021-02-31 00:00:00", "2021-01-01 24:00:00", "2021-01-01 00:00:60", "9999-12-31 00:00:00", "0000-00-00", "",
    "1e9", "-1", "99999999999999999999", "9300000000", "2021-01-01 00:00:00+99:99", "2021-01-01T00:00:00.1234567891",
    "2021-01-01 00:00:00+01:00", "1677-09-21 00:00:00", "2262-04-12 00:00:00", "31/12/2021", "2021-13-01",
]  # fmt: skip
TIMEZONES = ["UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Australia/Lord_Howe"]


def _format_time(seconds: int, fmt: str) -> str:
    if fmt.startswith("epoch_"):
        return str(seconds * {"epoch_s": 1, "epoch_ms": 10**3, "epoch_ns": 10**9}[fmt])
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime(fmt)


@st.composite
def csv_grid(draw: st.DrawFn) -> tuple[list[str], list[list[str]], str]:
    """A header and rows of text cells for valid bars, and the time format they were written with."""
    data: Bars = draw(bars())
    fmt = draw(st.sampled_from(TIME_FORMATS))
    header = [draw(st.sampled_from(HEADERS[role])) for role in HEADERS]
    rows = [[_format_time(int(s), fmt), *(repr(float(v)) for v in data.ohlcv[i])] for i, s in enumerate(data.seconds)]
    return header, rows, fmt


_GRID_MUTATION = st.one_of(
    st.tuples(st.just("swap_columns"), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("delete_column"), st.integers(0, 9)),
    st.tuples(st.just("duplicate_column"), st.integers(0, 9), st.sampled_from([str, str.upper, str.lower])),
    st.tuples(st.just("rename_column"), st.integers(0, 9), st.text(max_size=8)),
    st.tuples(st.just("set_cell"), st.integers(0, 99), st.integers(1, 9), st.sampled_from(BAD_CELLS) | st.text(max_size=6)),
    st.tuples(st.just("set_time"), st.integers(0, 99), st.sampled_from(BAD_TIMES) | st.text(max_size=12)),
    st.tuples(st.just("swap_rows"), st.integers(0, 99), st.integers(0, 99)),
    st.tuples(st.just("duplicate_row"), st.integers(0, 99)),
    st.tuples(st.just("delete_row"), st.integers(0, 99)),
    st.tuples(st.just("blank_line"), st.integers(0, 99)),
    st.tuples(st.just("extra_field"), st.integers(0, 99)),
    st.tuples(st.just("missing_field"), st.integers(0, 99)),
)


def mutate_grid(header: list[str], rows: list[list[str]], mutations: list[tuple]) -> tuple[list[str], list[list[str]]]:
    header, rows = list(header), [list(row) for row in rows]
    for kind, *args in mutations:
        width, height = len(header), len(rows)
        if kind == "swap_columns" and width:
            i, j = args[0] % width, args[1] % width
            header[i], header[j] = header[j], header[i]
        elif kind == "delete_column" and width:
            i = args[0] % width
            del header[i]
            for row in rows:
                del row[i : i + 1]
        elif kind == "duplicate_column" and width:
            i = args[0] % width
            header.append(args[1](header[i]))
            for row in rows:
                row.append(row[i] if i < len(row) else "")
        elif kind == "rename_column" and width:
            header[args[0] % width] = args[1]
        elif kind == "set_cell" and height:
            row = rows[args[0] % height]
            if row:
                row[args[1] % len(row)] = args[2]
        elif kind == "set_time" and height and rows[args[0] % height]:
            rows[args[0] % height][0] = args[1]
        elif kind == "swap_rows" and height:
            i, j = args[0] % height, args[1] % height
            rows[i], rows[j] = rows[j], rows[i]
        elif kind == "duplicate_row" and height:
            rows.insert(args[0] % height, list(rows[args[0] % height]))
        elif kind == "delete_row" and height:
            del rows[args[0] % height]
        elif kind == "blank_line":
            rows.insert(args[0] % (height + 1), [])
        elif kind == "extra_field" and height:
            rows[args[0] % height].append("1")
        elif kind == "missing_field" and height and rows[args[0] % height]:
            rows[args[0] % height].pop()
    return header, rows


def render_csv(header: list[str], rows: list[list[str]], quoting: int, newline: str) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=quoting, lineterminator=newline)
    writer.writerow(header)
    for row in rows:
        if row:
            writer.writerow(row)
        else:
            buffer.write(newline)
    return buffer.getvalue()


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[bytes, str, dict]:
    """Bytes of a CSV file (maybe gzip), its suffix, and the load options a user might pass."""
    header, rows, fmt = draw(csv_grid())
    header, rows = mutate_grid(header, rows, draw(st.lists(_GRID_MUTATION, max_size=4)))
    text = render_csv(header, rows, draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL])), draw(st.sampled_from(["\n", "\r\n"])))
    text += draw(st.sampled_from(["", "\n", "\n\n"]))
    data = text.encode(draw(st.one_of(st.just("utf-8"), encodings)), errors="replace")
    suffix = draw(st.sampled_from([".csv", ".csv", ".csv.gz"]))
    if suffix == ".csv.gz":
        data = gzip.compress(data, mtime=0)
    if draw(st.booleans()):
        data = damage(data, draw(byte_damage()))
    options = {
        "timezone": draw(st.sampled_from(TIMEZONES)),
        "duplicates": draw(st.sampled_from(["error", "drop_identical"])),
        "timestamp_format": draw(st.sampled_from([None, None, fmt, "%d/%m/%Y %H:%M:%S", "%Y"])) if not fmt.startswith("epoch") else None,
    }
    return data, suffix, options


# -- Parquet ------------------------------------------------------------------------------------
_NUMERIC_TYPES = [pa.float64(), pa.float32(), pa.int64(), pa.decimal128(24, 8), pa.string(), pa.float16(), pa.uint32()]


def _numbers(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    if pa.types.is_string(kind):
        return pa.array([repr(float(v)) for v in values], kind)
    if pa.types.is_integer(kind):
        return pa.array(np.round(values).astype(np.int64), pa.int64()).cast(kind, safe=False)
    if pa.types.is_decimal(kind):
        return pa.array(values, pa.float64()).cast(kind, safe=False)
    return pa.array(values, pa.float64()).cast(kind, safe=False)


@st.composite
def time_column(draw: st.DrawFn, seconds: np.ndarray) -> pa.Array:
    kind = draw(st.sampled_from(["text", "timestamp", "date", "integer"]))
    if kind == "text":
        fmt = draw(st.sampled_from([f for f in TIME_FORMATS if not f.startswith("epoch")]))
        return pa.array([_format_time(int(s), fmt) for s in seconds], draw(st.sampled_from([pa.string(), pa.large_string()])))
    if kind == "timestamp":
        unit, factor = draw(st.sampled_from([("s", 1), ("ms", 10**3), ("us", 10**6), ("ns", 10**9)]))
        zone = draw(st.sampled_from([None, "UTC", "America/New_York", "+05:30"]))
        return pa.array(seconds * factor, pa.int64()).cast(pa.timestamp(unit, zone))
    if kind == "date":
        return pa.array((seconds // 86_400).astype(np.int32), pa.int32()).cast(pa.date32())
    factor = draw(st.sampled_from([1, 10**3, 10**9]))
    return pa.array(seconds * factor, pa.int64()).cast(draw(st.sampled_from([pa.int64(), pa.uint64()])), safe=False)


SPECIAL_VALUES = [np.nan, np.inf, -np.inf, -1.0, 0.0, 1e308, 5e-324, 1e39, 2.0**64, -0.0]
_RETYPED = [pa.binary(), pa.bool_(), pa.null(), pa.large_string(), "list", "struct", "dictionary", pa.duration("s")]

_TABLE_MUTATION = st.one_of(
    st.tuples(st.just("null"), st.integers(0, 99), st.integers(0, 9)),
    st.tuples(st.just("value"), st.integers(0, 99), st.integers(1, 9), st.sampled_from(SPECIAL_VALUES)),
    st.tuples(st.just("swap_names"), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("delete_column"), st.integers(0, 9)),
    st.tuples(st.just("duplicate_column"), st.integers(0, 9), st.sampled_from([str, str.upper])),
    st.tuples(st.just("retype"), st.integers(0, 9), st.sampled_from(range(len(_RETYPED)))),
    st.tuples(st.just("reorder"), st.permutations(range(4))),
    st.tuples(st.just("duplicate_row"), st.integers(0, 99)),
)


def _retype(column: pa.Array, target: object) -> pa.Array:
    if target == "list":
        return pa.array([[value] for value in column.to_pylist()])
    if target == "struct":
        return pa.array([{"value": value} for value in column.to_pylist()])
    if target == "dictionary":
        return column.dictionary_encode()
    if target == pa.null():
        return pa.nulls(len(column))
    values = column.to_pylist()
    if target == pa.binary():
        values = [None if v is None else str(v).encode() for v in values]
    return pa.array(values).cast(target, safe=False)


def mutate_table(names: list[str], columns: list[pa.Array], mutations: list[tuple]) -> tuple[list[str], list[pa.Array]]:
    names, columns = list(names), list(columns)
    for kind, *args in mutations:
        if not columns:
            break
        width, height = len(columns), len(columns[0])
        if kind == "null" and height:
            c, r = args[1] % width, args[0] % height
            # a take with a null index puts a null at row r in a column of any type; pyarrow cannot build a null
            # scalar of every type (dictionary<decimal128>) nor if_else over every one (dictionary<halffloat>
            # raised ArrowNotImplementedError while generating a case)
            rows = pa.array([None if i == r else i for i in range(height)], type=pa.int64())
            columns[c] = columns[c].take(rows)
        elif kind == "value" and height and (pa.types.is_floating(columns[args[1] % width].type)):
            c, r = args[1] % width, args[0] % height
            values = columns[c].to_numpy(zero_copy_only=False).astype(np.float64)
            values[r] = args[2]
            columns[c] = pa.array(values).cast(columns[c].type, safe=False)
        elif kind == "swap_names":
            i, j = args[0] % width, args[1] % width
            names[i], names[j] = names[j], names[i]
        elif kind == "delete_column":
            del names[args[0] % width], columns[args[0] % width]
        elif kind == "duplicate_column":
            names.append(args[1](names[args[0] % width]))
            columns.append(columns[args[0] % width])
        elif kind == "retype":
            try:
                columns[args[0] % width] = _retype(columns[args[0] % width], _RETYPED[args[1]])
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                pass  # a type arrow cannot convert this column to: the column stays as it was
        elif kind == "reorder" and height:
            order = [i % height for i in args[0]] + list(range(height))
            columns = [column.take(pa.array(order[:height])) for column in columns]
        elif kind == "duplicate_row" and height:
            at = args[0] % height
            order = list(range(at + 1)) + list(range(at, height))
            columns = [column.take(pa.array(order)) for column in columns]
    return names, columns


@st.composite
def parquet_files(draw: st.DrawFn) -> bytes:
    data: Bars = draw(bars())
    names = [draw(st.sampled_from(HEADERS[role])) for role in HEADERS]
    columns = [draw(time_column(data.seconds))]
    for field in OHLCV:
        columns.append(_numbers(data.ohlcv[:, field], draw(st.sampled_from(_NUMERIC_TYPES))))
    names, columns = mutate_table(names, columns, draw(st.lists(_TABLE_MUTATION, max_size=3)))
    buffer = io.BytesIO()
    try:
        pq.write_table(pa.Table.from_arrays(columns, names=names), buffer)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError):
        assume(False)  # a table Parquet itself cannot hold is no test of the loader
    written = buffer.getvalue()
    return damage(written, draw(byte_damage())) if draw(st.booleans()) else written
