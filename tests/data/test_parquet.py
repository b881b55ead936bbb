"""Parquet: round trip through pyarrow, timezone-aware columns, row-numbered errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from foxhunt.data import load, load_parquet
from foxhunt.errors import DataError


def test_round_trip_of_a_bundled_dataset(tmp_path):
    market = load("sp500-1d-1999-2018")
    table = pa.table(
        {
            "timestamp": pa.array(market.timestamps, pa.timestamp("ns", "UTC")),
            "open": market.open, "high": market.high, "low": market.low, "close": market.close, "volume": market.volume,
        }
    )  # fmt: skip
    path = tmp_path / "sp500.parquet"
    pq.write_table(table, path)
    loaded = load(str(path), "ES")
    np.testing.assert_array_equal(loaded.timestamps, market.timestamps)
    np.testing.assert_array_equal(loaded.ohlcv, market.ohlcv)
    assert loaded.report.gaps == market.report.gaps


def test_naive_timestamp_column_uses_the_timezone(tmp_path):
    stamps = np.array(["2017-01-03T09:00", "2017-01-03T10:00", "2017-01-03T11:00"], "datetime64[ns]")
    table = pa.table({"Date": stamps, "Open": [1.0] * 3, "High": [2.0] * 3, "Low": [0.5] * 3, "Close": [1.5] * 3, "Volume": [1, 2, 3]})
    path = tmp_path / "naive.parquet"
    pq.write_table(table, path)
    loaded = load_parquet(path, timezone="Europe/Berlin")
    assert loaded.timestamps[0] == np.datetime64("2017-01-03T08:00", "ns")  # CET = UTC+1


def test_null_price_names_the_row_and_column(tmp_path):
    stamps = np.array(["2017-01-03", "2017-01-04", "2017-01-05"], "datetime64[ns]")
    table = pa.table({"time": stamps, "open": [1.0, None, 1.0], "high": [2.0] * 3, "low": [0.5] * 3, "close": [1.5] * 3, "volume": [1.0] * 3})
    path = tmp_path / "null.parquet"
    pq.write_table(table, path)
    with pytest.raises(DataError, match=r"null\.parquet: row 2, column 'open': value is missing"):
        load_parquet(path)


def test_missing_column_in_schema(tmp_path):
    path = tmp_path / "short.parquet"
    pq.write_table(pa.table({"time": np.array(["2017-01-03"], "datetime64[ns]"), "close": [1.0]}), path)
    with pytest.raises(DataError, match=r"short\.parquet: schema, .*no open column"):
        load_parquet(path)


def test_invalid_calendar_date_in_a_text_column_names_the_row(tmp_path):
    """A text timestamp column in Parquet is parsed like CSV text: 2021-02-31 is an error, not March 3."""
    table = pa.table({
        "time": ["2021-02-27 00:00:00", "2021-02-28 00:00:00", "2021-02-31 00:00:00"],
        "open": [1.0] * 3, "high": [2.0] * 3, "low": [0.5] * 3, "close": [1.5] * 3, "volume": [1.0] * 3,
    })  # fmt: skip
    path = tmp_path / "dates.parquet"
    pq.write_table(table, path)
    with pytest.raises(DataError, match=r"dates\.parquet: row 3, column 'time': timestamp '2021-02-31 00:00:00' is not a calendar date"):
        load_parquet(path)


def test_schema_columns_differing_only_in_case_are_an_error(tmp_path):
    stamps = np.array(["2017-01-03", "2017-01-04"], "datetime64[ns]")
    table = pa.table({"time": stamps, "open": [1.0] * 2, "high": [2.0] * 2, "low": [0.5] * 2, "close": [1.5] * 2,
                      "CLOSE": [1.2] * 2, "volume": [1.0] * 2})
    path = tmp_path / "case.parquet"
    pq.write_table(table, path)
    with pytest.raises(DataError, match=r"case\.parquet: schema, .*columns 'close' and 'CLOSE' differ only in case"):
        load_parquet(path)
