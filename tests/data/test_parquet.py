"""Parquet: round trip through pyarrow, timezone-aware columns, row-numbered errors."""

from __future__ import annotations

import datetime

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
    pq.write_table(pa.table({"time": np.array(["2017-01-03"], "datetime64[ns]"), "high": [1.0], "close": [1.0]}), path)
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


def _prices(n: int) -> dict[str, list[float]]:
    return {"open": [1.0] * n, "high": [2.0] * n, "low": [0.5] * n, "close": [1.5] * n, "volume": [1.0] * n}


@pytest.mark.parametrize(("values", "shown"), [
    (pa.array(np.array(["2017-01-03", "3000-01-01"], "datetime64[us]")), "3000-01-01 00:00:00"),
    (pa.array([datetime.date(2017, 1, 3), datetime.date(9999, 1, 1)], pa.date32()), "9999-01-01"),
    (pa.array([1_483_315_200_000_000_000, 2**63 + 5], pa.uint64()), "epoch time 9223372036854775813"),
])  # fmt: skip
def test_times_beyond_nanosecond_timestamps_name_the_row(tmp_path, values, shown):
    """Arrow's cast raised a traceback for the first two; a uint64 beyond int64 wrapped round to 1677."""
    path = tmp_path / "far.parquet"
    pq.write_table(pa.table({"time": values, **_prices(2)}), path)
    with pytest.raises(DataError, match=r"row 2, column 'time': .*outside the range") as caught:
        load_parquet(path)
    assert shown in str(caught.value)


def test_times_more_than_292_years_apart_are_refused_not_wrapped(tmp_path):
    """The int64 difference of 2200 and 1700 wraps positive: the decreasing pair passed as increasing."""
    for stamps, fragment in ([("2200-01-01", "1700-01-01"), "earlier than the previous row's"],
                             [("1700-01-01", "2200-01-01"), "more than 292 years after"]):
        path = tmp_path / "apart.parquet"
        pq.write_table(pa.table({"time": np.array(stamps, "datetime64[ns]"), **_prices(2)}), path)
        with pytest.raises(DataError, match=rf"row 2, column 'time': .*{fragment}"):
            load_parquet(path)


def test_dictionary_encoded_columns_load(tmp_path):
    """pandas writes a category column as a dictionary; both the time and the prices may be one."""
    times = pa.array(["2017-01-03", "2017-01-04", "2017-01-05"]).dictionary_encode()
    table = pa.table({"time": times, **{k: pa.array(v).dictionary_encode() for k, v in _prices(3).items()}})
    path = tmp_path / "dictionary.parquet"
    pq.write_table(table, path)
    market = load_parquet(path)
    assert market.timestamps[2] == np.datetime64("2017-01-05", "ns") and market.close.tolist() == [1.5] * 3


def test_a_column_name_that_is_not_utf8_is_one_error(tmp_path):
    """Found by fuzzing: pyarrow decodes the schema's names itself and raised UnicodeDecodeError."""
    path = tmp_path / "name.parquet"
    pq.write_table(pa.table({"time": np.array(["2017-01-03", "2017-01-04"], "datetime64[ns]"), **_prices(2)}), path)
    path.write_bytes(path.read_bytes().replace(b"volume", b"\x80olume"))
    with pytest.raises(DataError, match=r"name\.parquet: cannot read as Parquet \('utf-8' codec can't decode"):
        load_parquet(path)


def test_text_that_is_not_utf8_names_the_row_and_column(tmp_path):
    """Parquet text is not checked on read: arrow's cast said 'Failed to parse', and showing the cell raised."""
    good = pa.array([b"1.0", b"1.0", b"1.0"], pa.binary())
    bad = pa.array([b"1.0", b"1.\x80", b"1.0"], pa.binary())
    as_text = {name: pa.Array.from_buffers(pa.string(), 3, column.buffers()) for name, column in
               (("open", good), ("high", good), ("low", good), ("close", bad), ("volume", good))}  # fmt: skip
    path = tmp_path / "text.parquet"
    pq.write_table(pa.table({"time": pa.array(["2017-01-03", "2017-01-04", "2017-01-05"]), **as_text}), path)
    with pytest.raises(DataError, match=r"text\.parquet: row 2, column 'close': text that is not UTF-8"):
        load_parquet(path)


def test_pandas_unnamed_time_index_is_the_time_column(tmp_path):
    """DataFrame.to_parquet() writes an unnamed DatetimeIndex as __index_level_0__."""
    path = tmp_path / "pandas.parquet"
    times = np.array(["2017-01-02T00", "2017-01-02T01", "2017-01-02T02"], "datetime64[ns]")
    table = {"Open": [1.0, 1.1, 1.2], "High": [1.2, 1.3, 1.4], "Low": [0.9, 1.0, 1.1], "Close": [1.1, 1.2, 1.3],
             "Volume": [10, 11, 12], "__index_level_0__": pa.array(times, pa.timestamp("ns", "UTC"))}
    pq.write_table(pa.table(table), path)
    market = load_parquet(path)
    np.testing.assert_array_equal(market.timestamps, times)
    assert ("time", "__index_level_0__") in market.report.columns
