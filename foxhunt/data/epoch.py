"""Unix epoch times (integers, or digits written as text) to UTC nanoseconds.

The unit (seconds, milliseconds, microseconds, nanoseconds) is not written in the
file, so it is read from the magnitude of the column's median. Every row must then
have the magnitude of that unit: a column that mixes units (an export of seconds
appended to one of milliseconds) would otherwise load with some rows near 1970 or
far in the future, without a word. Every result must also fit foxhunt's
``datetime64[ns]`` timestamps (1677-09-21 to 2262-04-11): numpy's integer
multiplication wraps around silently, so a seconds value past 2262 would land in
another century.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from foxhunt.data.validate import RowLabel
from foxhunt.errors import DataError

__all__ = ["EPOCH_TEXT", "epoch_note", "epoch_to_ns", "epoch_text_to_int64", "integers_to_int64"]

# Text that is only digits and too long for %Y%m%d: Unix epoch times written as text (CSV).
EPOCH_TEXT = r"^-?\d{9,19}$"
# Magnitudes of each unit, lower bound inclusive: today's dates are about 1.7e9 s, 1.7e12 ms, 1.7e15 us, 1.7e18 ns.
_UNITS = (
    ("seconds", 0, 10**11, 10**9),
    ("milliseconds", 10**11, 10**14, 10**6),
    ("microseconds", 10**14, 10**17, 10**3),
    ("nanoseconds", 10**17, None, 1),
)
_INT64_MAX = np.iinfo(np.int64).max
_RANGE = "1677-09-21 to 2262-04-11"


def _unit(magnitude: int) -> tuple[str, int, int | None, int]:
    for unit in _UNITS:
        if unit[2] is None or magnitude < unit[2]:
            return unit
    raise AssertionError("the last unit has no upper bound")


def epoch_note(raw: np.ndarray) -> str:
    """The unit :func:`epoch_to_ns` reads ``raw`` in, for the load report ("Unix epoch milliseconds, UTC")."""
    unit = _unit(int(np.median(np.abs(raw)))) if raw.size else _UNITS[0]
    return f"Unix epoch {unit[0]}, UTC"


def epoch_to_ns(raw: np.ndarray, *, source: str, column: str, label: RowLabel) -> np.ndarray:
    """int64 epoch times in one unit (from the median's magnitude) as int64 nanoseconds; DataError naming a bad row."""
    if not raw.size:
        return raw
    # int64's minimum has no absolute value in int64 (it is numpy's NaT too): refuse it before taking magnitudes.
    lowest = np.flatnonzero(raw == np.iinfo(np.int64).min)
    if lowest.size:
        raise _out_of_range(source, column, label, int(lowest[0]), int(raw[lowest[0]]), "nanoseconds")
    magnitude = np.abs(raw)
    name, low, high, factor = _unit(int(np.median(magnitude)))
    outside = magnitude < low
    if high is not None:
        outside |= magnitude >= high
    bad = np.flatnonzero(outside)
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"{source}: {label(i)}, column {column!r}: epoch time {int(raw[i])} is not in {name}, the unit the "
            f"column's median magnitude gives (the rows mix units). Write every row in one unit and load again"
        )
    too_far = np.flatnonzero(magnitude > _INT64_MAX // factor)
    if too_far.size:
        i = int(too_far[0])
        raise _out_of_range(source, column, label, i, int(raw[i]), name)
    return raw * factor


def _out_of_range(source: str, column: str, label: RowLabel, index: int, value: int, unit: str) -> DataError:
    return DataError(
        f"{source}: {label(index)}, column {column!r}: epoch time {value} ({unit}) is outside the range foxhunt's "
        f"nanosecond timestamps hold ({_RANGE}). Correct that row and load again"
    )


def epoch_text_to_int64(text: pa.Array, *, source: str, column: str, label: RowLabel) -> np.ndarray:
    """Digits-only text (already matched by :data:`EPOCH_TEXT`) as int64, still in the file's unit."""
    try:
        raw = np.asarray(text.cast(pa.int64()))
    except pa.ArrowInvalid:
        # Nineteen digits can exceed int64; find the row only on this error path.
        for index, cell in enumerate(text.to_pylist()):
            if abs(int(cell)) > _INT64_MAX:
                raise _out_of_range(source, column, label, index, int(cell), "any unit") from None
        raise
    return raw


def integers_to_int64(values: pa.Array, *, source: str, column: str, label: RowLabel) -> np.ndarray:
    """An integer column as int64; unsigned values beyond int64 are refused (a plain cast would wrap them)."""
    if values.type == pa.uint64() and len(values):
        beyond = np.flatnonzero(np.asarray(pc.greater(values, pa.scalar(_INT64_MAX, values.type)).fill_null(False)))
        if beyond.size:
            i = int(beyond[0])
            raise _out_of_range(source, column, label, i, int(values[i].as_py()), "any unit")
    return np.asarray(values.cast(pa.int64()))
