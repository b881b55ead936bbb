"""Missing values: vendor markers read as missing, rows without prices dropped and listed, never silently
(foxhunt/data/missing.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from foxhunt.data import load
from foxhunt.errors import DataError

HEADER = "time,open,high,low,close,volume"
ROWS = [f"2017-01-02 {h:02d}:00,1.0,1.2,0.9,1.1,10" for h in range(8)]


def write(tmp_path, rows, name="bars.csv"):
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return str(path)


@pytest.mark.parametrize("marker", ["", ".", "null", "NULL", "NaN", "nan", "N/A", "#N/A"])
def test_every_vendor_marker_drops_a_row_without_prices_and_reports_it(tmp_path, marker):
    rows = list(ROWS)
    rows[3] = f"2017-01-02 03:00,{marker},{marker},{marker},{marker},{marker}"
    market = load(write(tmp_path, rows))
    assert len(market) == 7
    assert np.datetime64("2017-01-02T03:00", "ns") not in market.timestamps
    assert market.report.missing_dropped == (4,)
    assert any(note.startswith("dropped 1 row(s) where every price is missing") and "row 4 (line 5)" in note
               for note in market.report.notes)


def test_the_report_counts_every_dropped_row_and_names_the_first_five(tmp_path):
    rows = list(ROWS)
    for i in (1, 2, 3, 4, 5, 6):
        rows[i] = f"2017-01-02 {i:02d}:00,.,.,.,.,."
    market = load(write(tmp_path, rows))
    assert market.report.missing_dropped == (2, 3, 4, 5, 6, 7)
    (note,) = [note for note in market.report.notes if note.startswith("dropped 6 row(s)")]
    assert "row 2 (line 3), row 3 (line 4), row 4 (line 5), row 5 (line 6), row 6 (line 7), ..." in note


def test_a_row_missing_some_values_is_an_error_naming_row_column_and_the_setting(tmp_path):
    rows = list(ROWS)
    rows[2] = "2017-01-02 02:00,1.0,1.2,0.9,null,10"
    path = write(tmp_path, rows)
    with pytest.raises(DataError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: row 3 (line 4), column 'close': value is missing")
    assert """--set 'data.missing="drop"'""" in message
    dropped = load(path, missing="drop")
    assert len(dropped) == 7 and dropped.report.missing_dropped == (3,)


def test_missing_error_policy_refuses_even_an_empty_row(tmp_path):
    rows = list(ROWS)
    rows[5] = "2017-01-02 05:00,.,.,.,.,."
    with pytest.raises(DataError, match=r"row 6 \(line 7\), column 'open': value is missing.*data.missing=\"drop_empty\""):
        load(write(tmp_path, rows), missing="error")


def test_a_file_of_nothing_but_missing_rows_is_an_error(tmp_path):
    with pytest.raises(DataError, match="every row's values are missing"):
        load(write(tmp_path, [f"2017-01-02 0{h}:00,.,.,.,.,." for h in range(3)]))


def test_a_missing_time_is_never_dropped(tmp_path):
    rows = list(ROWS)
    rows[2] = ".,1.0,1.2,0.9,1.1,10"
    with pytest.raises(DataError, match=r"row 3 \(line 4\), column 'time': cannot parse timestamp '\.'"):
        load(write(tmp_path, rows))


def test_parquet_nulls_follow_the_same_policy(tmp_path):
    path = tmp_path / "bars.parquet"
    times = np.array(["2017-01-02T00", "2017-01-02T01", "2017-01-02T02", "2017-01-02T03"], "datetime64[ns]")
    nothing = [1.0, None, 1.0, 1.0]
    pq.write_table(pa.table({"time": times, "open": nothing, "high": nothing, "low": nothing, "close": nothing, "volume": [1, None, 1, 1]}), path)
    market = load(str(path))
    np.testing.assert_array_equal(market.timestamps, times[[0, 2, 3]])
    assert market.report.missing_dropped == (2,)


def test_identical_duplicates_after_a_dropped_row_name_the_files_rows(tmp_path):
    rows = [ROWS[0], "2017-01-02 01:00,.,.,.,.,.", ROWS[2], ROWS[2], ROWS[3]]
    market = load(write(tmp_path, rows), duplicates="drop_identical")
    assert market.report.missing_dropped == (2,)
    assert market.report.duplicates_dropped == (4,)
