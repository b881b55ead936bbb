"""Vendor missing-value markers, and what happens to the rows they leave without values.

Vendors mark a day without a value in their own way: FRED writes ``.``, Yahoo
Finance ``null``, others ``NaN``, ``N/A`` or nothing. Every such cell reads as
missing (NaN). A row whose prices are all missing is a day the vendor had no
data for (a holiday in FRED's calendar, a suspended day at Yahoo); a row missing
only some values is damaged. What happens to each is the ``missing`` policy:

- ``"drop_empty"`` (the default): rows with every price missing are dropped; a
  row with some values missing is an error naming it;
- ``"drop"``: every row with a missing value is dropped;
- ``"error"``: any missing value is an error naming its row.

Dropped rows are never silent: the load report counts them and names the first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from foxhunt.data.hints import set_option
from foxhunt.data.market import OHLCV
from foxhunt.data.validate import RowLabel
from foxhunt.errors import DataError

__all__ = ["MISSING_MARKERS", "MISSING_POLICIES", "missing_rows"]

# Cells read as missing in price and volume columns (compared after trimming spaces).
MISSING_MARKERS: tuple[str, ...] = ("", ".", "null", "NULL", "Null", "NaN", "nan", "NAN", "NA", "N/A", "n/a", "#N/A", "None")
MISSING_POLICIES: tuple[str, ...] = ("drop_empty", "drop", "error")
_PRICES = [OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW, OHLCV.CLOSE]
_SHOWN = 5


def missing_rows(
    source: str, ohlcv: np.ndarray, policy: str, *, names: Sequence[str], label: RowLabel
) -> tuple[np.ndarray, str | None]:
    """Indices of the rows to drop under ``policy``, and the report's note on them (None when none are dropped).

    A row that the policy does not drop but that has a missing value is a DataError naming the row and column.
    """
    if policy not in MISSING_POLICIES:
        raise DataError(f"{source}: missing={policy!r} is not a policy; use one of {MISSING_POLICIES}")
    absent = np.isnan(ohlcv)
    anywhere = absent.any(axis=1)
    if not anywhere.any():
        return np.empty(0, dtype=np.int64), None
    empty = absent[:, _PRICES].all(axis=1)
    dropped = {"drop_empty": empty, "drop": anywhere, "error": np.zeros_like(anywhere)}[policy]
    refused = np.flatnonzero(anywhere & ~dropped)
    if refused.size:
        row = int(refused[0])
        column = names[int(np.flatnonzero(absent[row])[0])]
        if policy == "drop_empty":
            action = (
                "Fill it in or remove the row, or load with " + set_option("missing", "drop")
                + " to drop every row with a missing value (the load report lists them)"
            )
        else:
            action = (
                "Fill it in or remove the row, or load with " + set_option("missing", "drop_empty")
                + " (rows without any price dropped) or " + set_option("missing", "drop") + " (every such row dropped)"
            )
        raise DataError(
            f"{source}: {label(row)}, column {column!r}: value is missing (empty, or a vendor marker such as "
            f"'.', 'null' or 'NaN'){' while the row has other values' if policy == 'drop_empty' else ''}. {action}"
        )
    rows = np.flatnonzero(dropped)
    why = "every price is missing" if policy == "drop_empty" else "a value is missing"
    shown = ", ".join(label(int(i)) for i in rows[:_SHOWN]) + (", ..." if rows.size > _SHOWN else "")
    return rows, f"dropped {rows.size} row(s) where {why} ('.', 'null', 'NaN' or empty): {shown}"
