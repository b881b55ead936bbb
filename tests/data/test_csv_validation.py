"""Every bad-input case gives one DataError naming the file, the row/line and the column."""

from __future__ import annotations

import re

import numpy as np
import pytest

from foxhunt.data import OHLCV, load, load_csv
from foxhunt.errors import DataError

HEADER = "Time,Open,High,Low,Close,Volume\n"
GOOD = [
    "2017-01-02 00:00:00,1.10,1.12,1.09,1.11,100",
    "2017-01-02 01:00:00,1.11,1.13,1.10,1.12,120",
    "2017-01-02 02:00:00,1.12,1.14,1.11,1.13,130",
    "2017-01-02 03:00:00,1.13,1.15,1.12,1.14,110",
]


def write(tmp_path, rows, header=HEADER, name="bars.csv"):
    path = tmp_path / name
    path.write_text(header + "\n".join(rows) + "\n")
    return path


def replace_row(index: int, text: str) -> list[str]:
    rows = list(GOOD)
    rows[index] = text
    return rows


# (case, row index to replace (0-based data row), replacement, column, message fragment)
BAD_CASES = [
    ("unparseable timestamp", 2, "2017-01-02 0x:00:00,1.12,1.14,1.11,1.13,130", "Time", "cannot parse timestamp"),
    ("day past the end of its month", 2, "2017-02-31 02:00:00,1.12,1.14,1.11,1.13,130", "Time", "not a calendar date"),
    ("second 60", 1, "2017-01-02 00:59:60,1.11,1.13,1.10,1.12,120", "Time", "not a calendar date"),
    ("negative price", 1, "2017-01-02 01:00:00,1.11,1.13,-1.10,1.12,120", "Low", "zero or negative"),
    ("zero price", 3, "2017-01-02 03:00:00,0,1.15,1.12,1.14,110", "Open", "zero or negative"),
    ("high below low", 2, "2017-01-02 02:00:00,1.12,1.10,1.11,1.13,130", "High", "below low"),
    ("open above high", 1, "2017-01-02 01:00:00,1.20,1.13,1.10,1.12,120", "Open", "outside the bar's range"),
    ("close below low", 1, "2017-01-02 01:00:00,1.11,1.13,1.10,1.05,120", "Close", "outside the bar's range"),
    ("empty cell", 2, "2017-01-02 02:00:00,1.12,1.14,1.11,,130", "Close", "value is missing"),
    ("NaN cell", 3, "2017-01-02 03:00:00,1.13,1.15,1.12,1.14,NaN", "Volume", "value is missing"),
    ("infinite cell", 3, "2017-01-02 03:00:00,1.13,1.15,1.12,inf,110", "Close", "missing or not a finite number"),
    ("text cell", 1, "2017-01-02 01:00:00,1.11,abc,1.10,1.12,120", "High", "is not a number"),
    ("negative volume", 3, "2017-01-02 03:00:00,1.13,1.15,1.12,1.14,-5", "Volume", "volume is negative"),
    ("duplicate timestamp", 2, "2017-01-02 01:00:00,1.12,1.14,1.11,1.13,130", "Time", "duplicates the previous"),
    ("unsorted timestamps", 2, "2017-01-01 23:00:00,1.12,1.14,1.11,1.13,130", "Time", "earlier than the previous"),
]


@pytest.mark.parametrize(("case", "index", "text", "column", "fragment"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_row_names_file_row_and_column(tmp_path, case, index, text, column, fragment):
    path = write(tmp_path, replace_row(index, text))
    with pytest.raises(DataError) as caught:
        load_csv(path)
    message = str(caught.value)
    assert str(path) in message
    assert f"row {index + 1} (line {index + 2})" in message  # data row and text line (header is line 1)
    assert f"column {column!r}" in message
    assert fragment in message


def test_invalid_calendar_date_is_refused_not_rolled_over(tmp_path):
    """2021-02-31 used to load as 2021-03-03; every date format and an explicit format refuse it, naming the row."""
    cases = [
        ("iso.csv", "Time", ["2021-02-27", "2021-02-28", "2021-02-31", "2021-03-04"], None),
        ("dotted.csv", "Date", ["27.02.2021", "28.02.2021", "31.02.2021", "04.03.2021"], None),
        ("us.csv", "Date", ["2/27/2021", "2/28/2021", "2/31/2021", "3/4/2021"], None),
        ("named.csv", "Date", ["27-Feb-2021", "28-Feb-2021", "31-Feb-2021", "04-Mar-2021"], "%d-%b-%Y"),
        ("april.csv", "Date", ["2021-04-29 10:00", "2021-04-30 10:00", "2021-04-31 10:00", "2021-05-03 10:00"], None),
    ]
    for name, column, stamps, fmt in cases:
        rows = [f"{stamp},1,2,0.5,1.5,1" for stamp in stamps]
        path = write(tmp_path, rows, header=f"{column},Open,High,Low,Close,Volume\n", name=name)
        with pytest.raises(DataError) as caught:
            load_csv(path, timestamp_format=fmt)
        message = str(caught.value)
        assert message.startswith(f"{path}: row 3 (line 4), column {column!r}: timestamp {stamps[2]!r}"), message
        assert "not a calendar date" in message and "would silently become 2021-0" in message


def test_invalid_date_in_a_separate_date_column_names_both_columns(tmp_path):
    rows = ["2021-02-28,10:00,1,2,0.5,1.5,1", "2021-02-29,10:00,1,2,0.5,1.5,1"]
    path = write(tmp_path, rows, header="Date,Time,Open,High,Low,Close,Volume\n")
    with pytest.raises(DataError, match=r"row 2 \(line 3\), column 'Date\+Time': timestamp '2021-02-29 10:00'"):
        load_csv(path)


def test_real_month_ends_and_leap_days_still_load(tmp_path):
    stamps = ["2020-02-29", "2020-03-31", "2020-04-30", "2021-01-31", "2021-02-28", "2021-03-01", "2021-03-03"]
    market = load_csv(write(tmp_path, [f"{stamp},1,2,0.5,1.5,1" for stamp in stamps], header="Date,Open,High,Low,Close,Volume\n"))
    np.testing.assert_array_equal(market.timestamps, np.array(stamps, "datetime64[ns]"))


def test_missing_column_is_named(tmp_path):
    path = write(tmp_path, [",".join(r.split(",")[:5]) for r in GOOD], header="Time,Open,High,Low,Close\n")
    with pytest.raises(DataError, match=r"header \(line 1\).*no volume column") as caught:
        load_csv(path)
    assert str(path) in str(caught.value)


def test_wrong_field_count_names_line(tmp_path):
    path = write(tmp_path, replace_row(1, "2017-01-02 01:00:00,1.11,1.13,1.10,1.12,120,999"))
    with pytest.raises(DataError, match=r"line 3: .*different number of fields"):
        load_csv(path)


def test_blank_line_inside_is_an_error_but_trailing_blank_lines_are_not(tmp_path):
    inside = write(tmp_path, [GOOD[0], "", *GOOD[1:]], name="inside.csv")
    with pytest.raises(DataError, match=r"row 2 \(line 3\)"):
        load_csv(inside)
    trailing = write(tmp_path, [*GOOD, "", ""], name="trailing.csv")
    assert len(load_csv(trailing)) == len(GOOD)


def test_duplicate_and_unsorted_rows_are_never_reordered(tmp_path):
    rows = [GOOD[1], GOOD[0], GOOD[2], GOOD[3]]
    with pytest.raises(DataError, match="foxhunt does not reorder rows"):
        load_csv(write(tmp_path, rows))


def test_identical_duplicates_dropped_only_on_request_and_reported(tmp_path):
    path = write(tmp_path, [GOOD[0], GOOD[1], GOOD[1], GOOD[2], GOOD[3]])
    with pytest.raises(DataError, match=r"row 3 \(line 4\).*duplicates"):
        load_csv(path)
    market = load_csv(path, duplicates="drop_identical")
    assert len(market) == 4
    assert market.report.duplicates_dropped == (3,)
    assert any("dropped 1 row" in note for note in market.report.notes)


def test_conflicting_duplicates_rejected_even_when_dropping_identical(tmp_path):
    conflicting = GOOD[1].replace("1.12,120", "1.125,120")
    path = write(tmp_path, [GOOD[0], GOOD[1], conflicting, GOOD[2]])
    with pytest.raises(DataError, match=r"row 3 \(line 4\), column 'Time'"):
        load_csv(path, duplicates="drop_identical")


def test_gap_is_reported_and_data_still_loads(tmp_path):
    rows = list(GOOD) + [
        "2017-01-02 07:00:00,1.14,1.16,1.13,1.15,90",  # 04:00-06:00 missing: 3 bars
        "2017-01-02 08:00:00,1.15,1.16,1.13,1.14,95",
    ]
    market = load_csv(write(tmp_path, rows))
    assert len(market) == 6
    (gap,) = market.report.gaps
    assert gap.after == 3 and gap.missing_bars == 3
    assert gap.previous == np.datetime64("2017-01-02T03:00", "ns")
    assert gap.next == np.datetime64("2017-01-02T07:00", "ns")
    assert "1 gap(s) (3 missing bars)" in market.report.summary()


def test_column_detection_is_case_insensitive_and_ignores_adj_close(tmp_path):
    header = "date,OPEN,high,Low,close,Adj Close,VOLUME\n"
    rows = ["1/13/1999,10,12,9,11,10.5,100", "1/14/1999,11,13,10,12,11.5,110", "1/15/1999,12,14,11,13,12.5,120"]
    path = write(tmp_path, rows, header=header)
    market = load_csv(path)
    np.testing.assert_array_equal(market.close, [11, 12, 13])
    np.testing.assert_array_equal(market.timestamps, np.array(["1999-01-13", "1999-01-14", "1999-01-15"], "datetime64[ns]"))
    adjusted = load_csv(path, columns={"close": "Adj Close"}, duplicates="error")
    np.testing.assert_array_equal(adjusted.ohlcv[:, OHLCV.CLOSE], [10.5, 11.5, 12.5])


def test_ambiguous_and_mapped_columns(tmp_path):
    path = write(tmp_path, ["2017-01-02,1,2,0.5,1.5,10,2017-01-02"] * 1, header="Date,Open,High,Low,Close,Volume,Timestamp\n")
    with pytest.raises(DataError, match="time could be any of"):
        load_csv(path)
    with pytest.raises(DataError, match="mapped to 'Nope'"):
        load_csv(path, columns={"time": "Nope"})
    with pytest.raises(DataError, match="unknown column role"):
        load_csv(path, columns={"price": "Close"})


def test_volume_may_be_mapped_absent(tmp_path):
    rows = [",".join(r.split(",")[:5]) for r in GOOD]
    market = load_csv(write(tmp_path, rows, header="Time,Open,High,Low,Close\n"), columns={"volume": None})
    assert np.all(market.volume == 0)
    assert any("no volume column" in note for note in market.report.notes)


def test_separate_date_and_time_columns(tmp_path):
    header = "Date,Time,Open,High,Low,Close,Volume\n"
    rows = ["2017.01.02,00:00,1,2,0.5,1.5,1", "2017.01.02,01:00,1,2,0.5,1.5,1", "2017.01.02,02:00,1,2,0.5,1.5,1"]
    market = load_csv(write(tmp_path, rows, header=header))
    assert market.timestamps[2] == np.datetime64("2017-01-02T02:00", "ns")


def test_timezone_offsets_and_wall_time(tmp_path):
    rows = ["2017-07-03 09:30:00,10,11,9,10,1", "2017-07-03 10:30:00,10,11,9,10,1", "2017-07-03 11:30:00,10,11,9,10,1"]
    path = write(tmp_path, rows)
    new_york = load_csv(path, timezone="America/New_York")
    assert new_york.timestamps[0] == np.datetime64("2017-07-03T13:30", "ns")  # EDT = UTC-4
    assert load_csv(path).timestamps[0] == np.datetime64("2017-07-03T09:30", "ns")
    offset_rows = ["2017-07-03T09:30:00.250-04:00,10,11,9,10,1", "2017-07-03T14:30:00Z,10,11,9,10,1", "2017-07-03T16:30:00+01:00,10,11,9,10,1"]
    aware = load_csv(write(tmp_path, offset_rows, name="aware.csv"), timezone="Asia/Tokyo")
    expected = np.array(["2017-07-03T13:30:00.250", "2017-07-03T14:30", "2017-07-03T15:30"], "datetime64[ns]")
    np.testing.assert_array_equal(aware.timestamps, expected)


def test_daylight_saving_ambiguity_is_an_error(tmp_path):
    rows = ["2017-11-05 00:30:00,10,11,9,10,1", "2017-11-05 01:30:00,10,11,9,10,1", "2017-11-05 02:30:00,10,11,9,10,1"]
    with pytest.raises(DataError, match=r"row 2 \(line 3\), column 'Time'.*America/New_York"):
        load_csv(write(tmp_path, rows), timezone="America/New_York")
    with pytest.raises(DataError, match="unknown timezone"):
        load_csv(write(tmp_path, rows, name="b.csv"), timezone="Mars/Olympus")


def test_ambiguous_day_month_order_needs_a_format(tmp_path):
    rows = ["01/02/2017,1,2,0.5,1.5,1", "02/02/2017,1,2,0.5,1.5,1", "03/02/2017,1,2,0.5,1.5,1"]
    path = write(tmp_path, rows)
    with pytest.raises(DataError, match="ambiguous.*timestamp_format"):
        load_csv(path)
    market = load_csv(path, timestamp_format="%d/%m/%Y")
    assert market.timestamps[1] == np.datetime64("2017-02-02", "ns")


def test_epoch_integer_timestamps(tmp_path):
    rows = ["1483315200000,1,2,0.5,1.5,1", "1483318800000,1,2,0.5,1.5,1", "1483322400000,1,2,0.5,1.5,1"]
    market = load_csv(write(tmp_path, rows))
    assert market.timestamps[0] == np.datetime64("2017-01-02T00:00", "ns")


def test_load_resolves_paths_and_rejects_unknown_sources(tmp_path):
    path = write(tmp_path, GOOD)
    assert len(load(str(path))) == 4
    with pytest.raises(DataError, match=re.escape("not a dataset name")):
        load(str(tmp_path / "bars.xlsx"))
    with pytest.raises(DataError, match="no such file"):
        load(str(tmp_path / "absent.csv"))


def test_columns_differing_only_in_case_are_an_error_naming_both(tmp_path):
    """close and Close with different values: detection would take the first silently, so it is refused."""
    header = "Time,Open,High,Low,close,Close,Volume\n"
    # each row: time, open, high, low, close, then Close = its low (another valid close), volume
    rows = [",".join([*r.split(",")[:5], r.split(",")[3], r.split(",")[5]]) for r in GOOD]
    path = write(tmp_path, rows, header=header)
    with pytest.raises(DataError) as caught:
        load_csv(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: header (line 1)")
    assert "columns 'close' and 'Close' differ only in case" in message
    assert """--set 'data.columns={close="Close"}'""" in message  # the command-line fix, ready to paste
    chosen = load_csv(path, columns={"close": "Close"})  # naming one exactly is the way out
    np.testing.assert_array_equal(chosen.close, [float(r.split(",")[3]) for r in GOOD])


def test_repeated_column_name_and_case_clash_of_the_date_column(tmp_path):
    repeated = write(tmp_path, [r + ",1" for r in GOOD], header="Time,Open,High,Low,Close,Volume,Volume\n", name="twice.csv")
    with pytest.raises(DataError, match="2 columns are named 'Volume'"):
        load_csv(repeated)
    rows = ["2017-01-02,2017-01-02,00:00,1,2,0.5,1.5,1"]
    clash = write(tmp_path, rows, header="date,Date,Time,Open,High,Low,Close,Volume\n", name="dates.csv")
    with pytest.raises(DataError, match="columns 'date' and 'Date' differ only in case"):
        load_csv(clash)


def test_unread_columns_may_differ_only_in_case(tmp_path):
    path = write(tmp_path, [r + ",a,b" for r in GOOD], header="Time,Open,High,Low,Close,Volume,note,Note\n")
    assert len(load_csv(path)) == len(GOOD)


# Found by the fuzzing suite (tests/fuzz): each loaded nonsense silently or ended in a traceback.
FUZZ_FOUND = [  # (case, first time, second time, fragment naming the second row)
    ("epoch digits beyond int64", "1483315200000000000", "9999999999999999999",
     "epoch time 9999999999999999999 (any unit) is outside the range"),
    ("epoch seconds past 2262", "9000000000", "9300000000", "epoch time 9300000000 (seconds) is outside the range"),
    ("UTC offset +99:99", "2017-01-02 00:00:00+00:00", "2017-01-02 01:00:00+99:99",
     "timestamp '2017-01-02 01:00:00+99:99' has the UTC offset '+99:99', which is not an offset"),
]


@pytest.mark.parametrize(("case", "first", "second", "fragment"), FUZZ_FOUND, ids=[c[0] for c in FUZZ_FOUND])
def test_timestamps_that_used_to_wrap_or_shift_are_refused_naming_the_row(tmp_path, case, first, second, fragment):
    """The first two ended in a traceback or wrapped round to another century; the offset shifted the bar by days."""
    path = write(tmp_path, [f"{first},1,2,0.5,1.5,1", f"{second},1,2,0.5,1.5,1"])
    with pytest.raises(DataError, match=re.escape(f"{path}: row 2 (line 3), column 'Time': {fragment}")):
        load_csv(path)


def test_epoch_rows_in_another_unit_than_the_column_are_refused(tmp_path):
    """1e9 in a nanosecond column loaded as 1970-01-01T00:00:01, a gap of half a century before the rest."""
    rows = ["1000000000,1,2,0.5,1.5,1", "1000000000000000000,1,2,0.5,1.5,1", "1000000000000000001,1,2,0.5,1.5,1"]
    with pytest.raises(DataError, match=r"row 1 \(line 2\), column 'Time': epoch time 1000000000 is not in nanoseconds"):
        load_csv(write(tmp_path, rows))


@pytest.mark.parametrize(("row", "column", "fragment"), [
    ("2017-01-02 01:00:00,1e308,1e308,1e308,1e308,1", "Open", "price 1e+308 is outside [1.18e-38, 3.4e+38]"),
    ("2017-01-02 01:00:00,1e-320,1e-320,1e-320,1e-320,1", "Open", "price 1e-320 is outside"),
    ("2017-01-02 01:00:00,1.11,1.13,1.10,1.12,1e39", "Volume", "volume 1e+39 is beyond float32's 3.4e+38"),
])  # fmt: skip
def test_values_float32_cannot_hold_are_refused(tmp_path, row, column, fragment):
    """Training computes in float32: 1e308 became inf there, 1e-320 zero."""
    with pytest.raises(DataError, match=re.escape(f"row 2 (line 3), column {column!r}: {fragment}")):
        load_csv(write(tmp_path, replace_row(1, row)))


@pytest.mark.parametrize("cell", ["1_0", "\u0661", "1.1.1", " 1 2 "])
def test_a_cell_python_reads_but_arrow_does_not_is_named(tmp_path, cell):
    """Python's float() reads '1_0' and Arabic-Indic digits: the row search used it, found nothing, re-raised arrow's error."""
    path = write(tmp_path, replace_row(2, f"2017-01-02 02:00:00,{cell},1.14,1.11,1.13,130"))
    with pytest.raises(DataError, match=re.escape(f"row 3 (line 4), column 'Open': {cell.strip()!r} is not a number")):
        load_csv(path)


def test_a_header_field_longer_than_the_csv_modules_limit_is_one_error(tmp_path):
    path = write(tmp_path, GOOD, header="Time,Open,High,Low,Close,Volume," + "x" * 200_000 + "\n")
    with pytest.raises(DataError, match=r"line 1: cannot read the header \(field larger than field limit"):
        load_csv(path)


def test_one_column_may_play_several_roles(tmp_path):
    rows = ["2017-01-02 00:00:00,1.10,5", "2017-01-02 01:00:00,1.11,6"]
    path = write(tmp_path, rows, header="Time,Price,Size\n")
    market = load_csv(path, columns={"open": "Price", "high": "Price", "low": "Price", "close": "Price", "volume": "Size"})
    np.testing.assert_array_equal(market.ohlcv, [[1.10] * 4 + [5], [1.11] * 4 + [6]])


def test_numbers_padded_with_spaces_load_through_the_text_reader(tmp_path):
    rows = [" 2017-01-02 00:00:00 , 1.10 ,1.12, 1.09,1.11 , 100", "2017-01-02 01:00:00,1.11,1.13,1.10,1.12,120"]
    market = load_csv(write(tmp_path, rows))
    np.testing.assert_array_equal(market.ohlcv[0], [1.10, 1.12, 1.09, 1.11, 100])


def test_a_damaged_gzip_is_one_error(tmp_path):
    """Found by fuzzing: a damaged .csv.gz raised zlib.error (not an OSError) while the header was read."""
    import gzip

    data = bytearray(gzip.compress((HEADER + "\n".join(GOOD) + "\n").encode(), mtime=0))
    data[12:20] = b"\xff" * 8
    path = tmp_path / "bars.csv.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"bars\.csv\.gz: cannot read the file \("):
        load_csv(path)


@pytest.mark.parametrize(("encoding", "line", "byte"), [("latin-1", 4, "0xe9"), ("utf-16", 1, "0xff")])
def test_text_that_is_not_utf8_names_its_line_and_byte(tmp_path, encoding, line, byte):
    """Found by fuzzing: a row of another field count holding non-UTF-8 bytes made arrow's invalid-row callback
    fail to decode it, and Python printed that traceback on stderr ("Exception ignored in ...")."""
    rows = [*GOOD[:2], GOOD[2] + ",caf\u00e9", GOOD[3]]
    path = tmp_path / "bars.csv"
    path.write_bytes((HEADER + "\n".join(rows) + "\n").encode(encoding))
    with pytest.raises(DataError, match=rf"bars\.csv: line {line}: byte {byte} is not UTF-8 text, and a CSV must be UTF-8"):
        load_csv(path)
