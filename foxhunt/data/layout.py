"""Which layout a text file of bars has: separator, decimal mark, lines above the header, header or none, vendor.

Read from the file's first :data:`SAMPLE_LINES` lines, before arrow reads the
rest. The separator is the one of :data:`DELIMITERS` that splits the most lines
into the same number of fields (two or more) whose cells look like values
(numbers, times, missing markers); the table starts at the first line with that
many fields. Lines above it are skipped only when they cannot be data: they have
another number of fields and do not start with a digit (a vendor's banner such as
``https://www.CryptoDataDownload.com``, or ``#`` comments); the report lists
them. The first table line is a header unless one of its cells is a number or a
time. Files without a header are recognised by shape (:func:`_headerless`):
Binance klines, MetaTrader's date and time columns, and time followed by
open, high, low, close (and volume), or by a close alone. Any other headerless
file has columns ``column 1``, ``column 2``, ... and is an error naming the
``--set data.columns`` mapping to pass, unless one is passed.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections import Counter
from pathlib import Path

import attrs

from foxhunt.data.hints import set_columns, set_option
from foxhunt.data.missing import MISSING_MARKERS
from foxhunt.errors import DataError

__all__ = ["DECIMALS", "DELIMITERS", "SAMPLE_LINES", "TextLayout", "open_text", "sniff_text"]

DELIMITERS: tuple[str, ...] = (",", ";", "\t", "|")
DECIMALS: tuple[str, ...] = (".", ",")
SAMPLE_LINES = 64
_LINE_LIMIT = 1 << 17  # characters in a line of the first lines: the csv module's field limit
_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "'|'"}
_NUMBER = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)([eE][+-]?\d+)?$")
_DECIMAL = re.compile(r"^[+-]?\d+([.,])(\d+)$")
_TIME = re.compile(r"^\d[\d\-./: T]*(\.\d+)?\s*(Z|UTC|[+-]\d\d:?\d\d)?$")
_MARKERS = frozenset(MISSING_MARKERS)
BINANCE_KLINES = (
    "open_time", "open", "high", "low", "close", "volume", "close_time", "quote_volume", "trades",
    "taker_buy_volume", "taker_buy_quote_volume", "ignore",
)  # fmt: skip


def open_text(path: Path) -> io.TextIOBase:
    """The file as text (gzip by its name), a byte-order mark dropped, line endings kept for the csv module."""
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


@attrs.frozen
class TextLayout:
    """How to read a text file: ``skip_lines`` lines above the table, then the header (if ``header``), then rows.

    ``names`` are the columns (a headerless file's are named by the layout recognised, or ``column 1``, ...);
    ``defaults`` maps roles to names where the layout knows them and name detection would not find them;
    ``kind`` and ``notes`` are for the load report.
    """

    delimiter: str
    decimal: str
    skip_lines: int
    header: bool
    names: tuple[str, ...]
    kind: str
    defaults: dict[str, str | None] = attrs.field(factory=dict)
    notes: tuple[str, ...] = ()
    unrecognised: str | None = None  # a headerless layout not recognised: the error, unless columns are mapped

    @property
    def header_lines(self) -> int:
        """Lines above the first data row (what CSV errors add to a row number to name its line)."""
        return self.skip_lines + int(self.header)


def _read_lines(path: Path, source: str) -> list[str]:
    lines = []
    try:
        with open_text(path) as handle:
            while len(lines) < SAMPLE_LINES and (line := handle.readline(_LINE_LIMIT + 1)):
                if len(line) > _LINE_LIMIT:
                    raise DataError(
                        f"{source}: line {len(lines) + 1}: cannot read the header (field larger than field limit: "
                        f"the line is longer than {_LINE_LIMIT} characters). Check that the file is CSV text of bars"
                    )
                lines.append(line.rstrip("\r\n"))
    except (OSError, UnicodeDecodeError, EOFError, zlib.error) as error:
        # EOFError and zlib.error: a truncated or damaged .gz.
        raise DataError(f"{path}: line 1: cannot read the file ({error}). Check the path and that it is UTF-8 CSV text") from None
    if not any(line.strip() for line in lines):
        raise DataError(f"{source}: line 1: the file is empty; a CSV needs a header line and data rows")
    return lines


def _split(line: str, delimiter: str) -> list[str]:
    try:
        return [cell.strip() for cell in next(csv.reader([line], delimiter=delimiter), [])]
    except csv.Error:  # a field longer than the csv module's limit: not a line of bars
        return [line]


def _value(cell: str) -> bool:
    """A number or a time (it has a digit), not a name."""
    return bool(_NUMBER.match(cell) or _TIME.match(cell))


def _banner(line: str, cells: list[str] | None) -> bool:
    """A line above the table that can be neither a row nor a header: a blank, a ``#`` comment, or one field
    (a URL, a title) that does not start like a number."""
    text = line.strip().lstrip("\"'")
    if not text or text.startswith("#"):
        return True
    return cells is not None and len(cells) < 2 and not (text[0].isdigit() or text[0] in "+-.")


@attrs.frozen
class _Table:
    delimiter: str
    width: int
    start: int  # index into the lines of the table's first line
    covered: int  # lines of the sample with ``width`` fields from ``start`` on
    values: float  # share of the cells below the first line that look like values or markers


def _table(lines: list[str], delimiter: str) -> _Table | None:
    split = [_split(line, delimiter) if line.strip() else None for line in lines]
    counts = Counter(len(cells) for cells in split if cells is not None)
    width = max(counts, key=lambda n: (counts[n], n))
    if width < 2:
        return None
    start = next(i for i, cells in enumerate(split) if cells is not None and len(cells) == width)
    if not all(_banner(line, cells) for line, cells in zip(lines[:start], split[:start], strict=True)):
        start = next(i for i, cells in enumerate(split) if cells is not None)
    rows = [cells for cells in split[start + 1 :] if cells is not None and len(cells) == width]
    cells = [cell for row in rows for cell in row]
    values = sum(1 for cell in cells if cell in _MARKERS or _value(cell)) / len(cells) if cells else 0.0
    covered = sum(1 for cells in split[start:] if cells is not None and len(cells) == width)
    return _Table(delimiter, width, start, covered, values)


def _choose_table(lines: list[str], source: str, delimiter: str | None) -> _Table:
    tables = [t for d in ((delimiter,) if delimiter else DELIMITERS) if (t := _table(lines, d)) is not None]
    if not tables:
        shown = next(line for line in lines if line.strip())
        if delimiter:
            raise DataError(
                f"{source}: line 1: {shown[:80]!r} does not split into columns at {_NAMES[delimiter]}s, the separator "
                f"set by data.delimiter. Leave data.delimiter unset to detect it, or set the file's own"
            )
        raise DataError(
            f"{source}: line 1: {shown[:80]!r} is one field under every separator foxhunt reads (comma, semicolon, "
            "tab, '|'); a file of bars needs a time column and prices"
        )
    tables.sort(key=lambda t: (t.covered, round(t.values, 3), t.width), reverse=True)
    best = tables[0]
    if len(tables) > 1 and (tables[1].covered, round(tables[1].values, 3)) == (best.covered, round(best.values, 3)):
        raise DataError(
            f"{source}: the separator is ambiguous: both {_NAMES[best.delimiter]} and {_NAMES[tables[1].delimiter]} "
            f"split every line into fields that look like values. Say which with {set_option('delimiter', best.delimiter)} "
            f"or {set_option('delimiter', tables[1].delimiter)}"
        )
    return best


def _decimal(rows: list[list[str]], source: str, decimal: str | None) -> str:
    if decimal:
        return decimal
    marks = Counter()
    three = 0
    for row in rows:
        for cell in row:
            if match := _DECIMAL.match(cell):
                marks[match.group(1)] += 1
                three += match.group(1) == "," and len(match.group(2)) == 3
    if not marks[","]:
        return "."
    if marks["."] or three == marks[","]:
        seen = f"numbers such as {next(c for r in rows for c in r if ',' in c and _DECIMAL.match(c))!r}"
        raise DataError(
            f"{source}: the decimal mark is ambiguous: the first lines hold {seen}, where ',' is a decimal comma or a "
            f"thousands separator. Say which with {set_option('decimal', ',')} (decimal comma) or "
            f"{set_option('decimal', '.')} (then the thousands separators must be removed from the file)"
        )
    return ","


def _headerless(first: list[str], source: str) -> tuple[tuple[str, ...], str, dict[str, str | None], str | None]:
    """Column names, the layout's name and role defaults for a file whose first line is already data, and the
    error to raise when the shape is not recognised and the user maps no columns (``column 1``, ...)."""
    width = len(first)
    if width == 12 and re.fullmatch(r"\d{12,17}", first[0]) and re.fullmatch(r"\d{12,17}", first[6]):
        return BINANCE_KLINES, "Binance klines (no header; open time in epoch milliseconds or microseconds)", {}, None
    dated = _TIME.match(first[0]) and ":" not in first[0] and width > 1 and re.fullmatch(r"\d{1,2}:\d\d(:\d\d)?", first[1])
    if dated and width in (7, 9):
        names = ("date", "time", "open", "high", "low", "close", "tickvol", "vol", "spread")[:width]
        vendor = "MetaTrader" if re.fullmatch(r"\d{4}\.\d\d\.\d\d", first[0]) else "headerless"
        volume = "tick volume" if width == 7 else "real volume (tickvol and spread not read)"
        defaults = {"volume": "tickvol"} if width == 7 else {}
        return names, f"{vendor} export without a header: date, time, open, high, low, close, {volume}", defaults, None
    if dated and width == 6:
        names = ("date", "time", "open", "high", "low", "close")
        return names, "headerless: date, time, open, high, low, close", {"volume": None}, None
    if _value(first[0]) and width in (5, 6):
        names = ("time", "open", "high", "low", "close", "volume")[:width]
        return names, "headerless: " + ", ".join(names), {} if width == 6 else {"volume": None}, None
    if _value(first[0]) and width == 2:
        return ("time", "close"), "headerless close-only series: time, close", {}, None
    names = tuple(f"column {i + 1}" for i in range(width))
    example = {"time": "column 1", "open": "column 2", "high": "column 3", "low": "column 4", "close": "column 5"}
    problem = (
        f"{source}: the file has no header and {width} columns per line, which is not a layout foxhunt recognises "
        "(time, open, high, low, close[, volume]; MetaTrader's date, time, ...; Binance klines; time, close). "
        f"Its columns are named {', '.join(repr(n) for n in names[:3])}, ...; say which is which, e.g. "
        f"{set_columns({**example, 'volume': ''})} (volume \"\" for none)"
    )
    return names, f"no header, {width} columns named column 1 to column {width}", {}, problem


def _header_kind(names: list[str]) -> str:
    lowered = [name.strip().lower() for name in names]
    if names and names[0].strip() == "":
        return "pandas DataFrame.to_csv (unnamed first column of times)"
    if all(name.startswith("<") and name.endswith(">") for name in lowered if name):
        return "MetaTrader export (<DATE>, <TIME>, ... header)"
    if {"date", "open", "high", "low", "close", "adj close", "volume"} <= set(lowered):
        return "Yahoo Finance (Close read: it is split-adjusted like Open, High and Low; Adj Close is not read)"
    if lowered[:1] == ["open_time"] and len(names) == 12:
        return "Binance klines with a header"
    return "CSV with a header"


def sniff_text(path: Path, source: str, *, delimiter: str | None = None, decimal: str | None = None) -> TextLayout:
    """The layout of a text file of bars (module docstring); one DataError when it cannot be told."""
    lines = _read_lines(path, source)
    table = _choose_table(lines, source, delimiter)
    first = _split(lines[table.start], table.delimiter)
    rows = [cells for line in lines[table.start :] if line.strip() and len(cells := _split(line, table.delimiter)) == table.width]
    header = not any(_value(cell) for cell in first)
    decimal_mark = _decimal(rows[1:] if header else rows, source, decimal)
    unrecognised = None
    if header:
        names = tuple(name.strip() for name in next(csv.reader([lines[table.start]], delimiter=table.delimiter)))
        kind, defaults = _header_kind(list(names)), {}
    else:
        names, kind, defaults, unrecognised = _headerless(first, source)
    details = [] if table.delimiter == "," else [f"{_NAMES[table.delimiter]}-separated"]
    if decimal_mark == ",":
        details.append("decimal comma")
    notes = []
    written = [line for line in lines[: table.start] if line.strip()]
    if table.start:
        shown = "; ".join(repr(line[:80]) for line in written[:3]) + ("; ..." if len(written) > 3 else "")
        notes.append(f"skipped {table.start} line(s) above the {'header' if header else 'first row'}: {shown or 'blank'}")
    return TextLayout(
        delimiter=table.delimiter, decimal=decimal_mark, skip_lines=table.start, header=header, names=names,
        kind=kind + "".join(f", {detail}" for detail in details), defaults=defaults, notes=tuple(notes),
        unrecognised=unrecognised,
    )
