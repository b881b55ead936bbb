"""The text layouts users have load without settings, to exactly the bars they hold (foxhunt/data/layout.py).

Each file is written as its vendor writes it; the bars must equal the same three hourly (or daily) bars,
and the load report must say which layout it recognised. Layouts that cannot be told apart are one
DataError naming the ``--set data.…`` keys that settle them.
"""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.data import OHLCV, load
from foxhunt.errors import DataError

HOURS = np.array(["2017-01-02T00:00", "2017-01-02T01:00", "2017-01-02T02:00"], "datetime64[ns]")
DAYS = np.array(["2017-01-03", "2017-01-04", "2017-01-05"], "datetime64[ns]")
BARS = np.array([[1.0, 1.2, 0.9, 1.1, 10], [1.1, 1.3, 1.0, 1.2, 11], [1.2, 1.4, 1.1, 1.3, 12]])
EPOCH_S = [1483315200, 1483318800, 1483322400]


def write(tmp_path, name: str, lines: list[str]) -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def rows(time_cells: list[str], sep: str = ",", decimal: str = ".", volume: bool = True) -> list[str]:
    width = 5 if volume else 4
    return [
        sep.join([time, *(f"{value:g}".replace(".", decimal) for value in bar[:width])])
        for time, bar in zip(time_cells, BARS, strict=True)
    ]


def assert_bars(market, times=HOURS, bars=BARS) -> None:
    np.testing.assert_array_equal(market.timestamps, times)
    np.testing.assert_array_equal(market.ohlcv, bars)


def test_pandas_to_csv_with_an_unnamed_index_of_times(tmp_path):
    """backtesting.py's sample data and DataFrame.to_csv() with a DatetimeIndex: the first header cell is empty."""
    path = write(tmp_path, "pandas.csv", [",Open,High,Low,Close,Volume", *rows([f"2017-01-02 0{h}:00:00" for h in range(3)])])
    market = load(path)
    assert_bars(market)
    assert "pandas" in market.report.layout
    assert ("time", "(unnamed column 1)") in market.report.columns


@pytest.mark.parametrize("blank", ["\x0c", " ", "\t"])
def test_header_names_padded_with_white_space_are_read_by_their_stripped_names(tmp_path, blank):
    """A first header cell of white space is pandas' unnamed index, and ' Close ' is 'Close': the reader must
    look the columns up by the names the sniffer gave them (hypothesis found a form feed raising pyarrow's
    KeyError)."""
    header = f"{blank},Open ,{blank}High,Low,Close{blank},Volume"
    market = load(write(tmp_path, "padded.csv", [header, *rows([f"2017-01-02 0{h}:00:00" for h in range(3)])]))
    assert_bars(market)


def test_banner_and_comment_lines_above_the_header_are_skipped_and_reported(tmp_path):
    banner = "https://www.CryptoDataDownload.com"
    lines = [banner, "# exported 2017-01-03", "", "date,open,high,low,close,volume",
             *rows([f"2017-01-02 0{h}:00:00" for h in range(3)])]  # fmt: skip
    market = load(write(tmp_path, "banner.csv", lines))
    assert_bars(market)
    assert any("skipped 3 line(s) above the header" in note and banner in note for note in market.report.notes)


def test_a_row_error_below_a_banner_names_the_files_own_line(tmp_path):
    lines = ["Bitstamp BTCUSD hourly", "date,open,high,low,close,volume", *rows(["2017-01-02 00:00", "2017-01-02 01:00", "bad"])]
    with pytest.raises(DataError, match=r"row 3 \(line 5\), column 'date': cannot parse timestamp 'bad'"):
        load(write(tmp_path, "banner.csv", lines))


def test_semicolons_with_decimal_commas(tmp_path):
    lines = ["Date;Open;High;Low;Close;Volume", *rows([f"02.01.2017 0{h}:00" for h in range(3)], sep=";", decimal=",")]
    market = load(write(tmp_path, "de.csv", lines))
    assert_bars(market)
    assert "semicolon-separated, decimal comma" in market.report.layout


def test_yahoo_finance_reads_close_not_adj_close_and_drops_null_days(tmp_path):
    lines = [
        "Date,Open,High,Low,Close,Adj Close,Volume",
        "2017-01-03,1.0,1.2,0.9,1.1,1.05,10",
        "2017-01-04,null,null,null,null,null,null",
        "2017-01-05,1.1,1.3,1.0,1.2,1.15,11",
        "2017-01-06,1.2,1.4,1.1,1.3,1.25,12",
    ]
    market = load(write(tmp_path, "AAPL.csv", lines))
    assert_bars(market, np.array(["2017-01-03", "2017-01-05", "2017-01-06"], "datetime64[ns]"))
    assert "Yahoo Finance" in market.report.layout and "Adj Close is not read" in market.report.layout
    assert market.report.missing_dropped == (2,)


def test_metatrader_export_without_header_tab_separated(tmp_path):
    lines = rows([f"2017.01.02\t0{h}:00" for h in range(3)], sep="\t")
    market = load(write(tmp_path, "EURUSD60.csv", lines))
    assert_bars(market)
    assert market.report.layout.startswith("MetaTrader export without a header")
    assert ("volume", "tickvol") in market.report.columns


def test_metatrader5_header_with_angle_brackets_reads_real_volume(tmp_path):
    header = "<DATE>\t<TIME>\t<OPEN>\t<HIGH>\t<LOW>\t<CLOSE>\t<TICKVOL>\t<VOL>\t<SPREAD>"
    body = [f"2017.01.02\t0{h}:00:00\t" + "\t".join(f"{v:g}" for v in bar[:4]) + f"\t99\t{bar[4]:g}\t2" for h, bar in enumerate(BARS)]
    market = load(write(tmp_path, "EURUSD_H1.txt", [header, *body]))
    assert_bars(market)
    assert ("volume", "<VOL>") in market.report.columns


def test_binance_klines_without_header(tmp_path):
    body = [
        f"{ms},{bar[0]:g},{bar[1]:g},{bar[2]:g},{bar[3]:g},{bar[4]:g},{ms + 3_599_999},123.4,42,5.5,60.1,0"
        for ms, bar in zip((s * 1000 for s in EPOCH_S), BARS, strict=True)
    ]
    market = load(write(tmp_path, "BTCUSDT-1h-2017-01.csv", body))
    assert_bars(market)
    assert market.report.layout.startswith("Binance klines")
    assert "Unix epoch milliseconds, UTC" in market.report.timestamps


@pytest.mark.parametrize("scale, unit", [(1, "seconds"), (1000, "milliseconds")])
def test_epoch_seconds_and_milliseconds(tmp_path, scale, unit):
    market = load(write(tmp_path, "epoch.csv", ["time,open,high,low,close,volume", *rows([str(s * scale) for s in EPOCH_S])]))
    assert_bars(market)
    assert f"Unix epoch {unit}, UTC" in market.report.timestamps


@pytest.mark.parametrize("suffix", ["Z", "+00:00", "+0000", " UTC"])
def test_utc_suffixes(tmp_path, suffix):
    times = [f"2017-01-02T0{h}:00:00{suffix}" for h in range(3)]
    market = load(write(tmp_path, "utc.csv", ["timestamp,open,high,low,close,volume", *rows(times)]), timezone="Asia/Tokyo")
    assert_bars(market)  # the offset is exact: the timezone setting does not move the bars
    assert "per-row UTC offsets" in market.report.timestamps


def test_headerless_time_open_high_low_close_volume(tmp_path):
    market = load(write(tmp_path, "plain.csv", rows([f"2017-01-02 0{h}:00" for h in range(3)])))
    assert_bars(market)
    assert market.report.layout.startswith("headerless: time, open, high, low, close, volume")


def test_fred_close_only_series_becomes_bars_with_ohlc_equal_to_the_close(tmp_path):
    lines = ["observation_date,SP500", "2017-01-02,.", "2017-01-03,2257.83", "2017-01-04,2270.75", "2017-01-05,2269"]
    market = load(write(tmp_path, "SP500.csv", lines))
    closes = np.array([2257.83, 2270.75, 2269.0])
    assert_bars(market, DAYS, np.column_stack([closes, closes, closes, closes, np.zeros(3)]))
    assert "close-only series" in market.report.layout
    assert any("limit order fills only when the next close passes through its price" in note for note in market.report.notes)
    assert market.report.missing_dropped == (1,)


def test_report_describes_layout_columns_times_frequency_and_drops(tmp_path):
    lines = ["DATE,SP500", "2017-01-02,.", "2017-01-03,1", "2017-01-04,2", "2017-01-05,3"]
    described = "\n".join(load(write(tmp_path, "SP500.csv", lines)).report.describe())
    assert "columns: time <- 'DATE', close <- 'SP500'" in described
    assert "read as UTC (data.timezone)" in described
    assert "frequency: 1d" in described
    assert "rows: 4 read, 3 kept, 1 dropped" in described
    assert "row 1 (line 2)" in described


# -- ambiguous layouts: one error naming the --set keys --------------------------------------------------


def test_two_value_columns_without_ohlc_name_the_close_key(tmp_path):
    lines = ["DATE,SP500,NASDAQCOM", "2017-01-03,2257.83,5429.08", "2017-01-04,2270.75,5477.00"]
    with pytest.raises(DataError) as caught:
        load(write(tmp_path, "fred2.csv", lines))
    message = str(caught.value)
    assert "close-only series" in message and "could be any of ['SP500', 'NASDAQCOM']" in message
    assert """--set 'data.columns={close="SP500"}'""" in message


def test_two_volume_columns_name_the_volume_key(tmp_path):
    lines = ["date,open,high,low,close,Volume BTC,Volume USDT", *(r + ",5" for r in rows([f"2017-01-02 0{h}:00" for h in range(3)]))]
    with pytest.raises(DataError, match=r"""volume could be any of \['Volume BTC', 'Volume USDT'\].*--set 'data.columns=\{volume="Volume BTC"\}'"""):
        load(write(tmp_path, "cdd.csv", lines))


def test_unknown_headerless_width_names_the_columns_key(tmp_path):
    lines = [f"2017-01-02 0{h}:00,1,2,0.5,1.5,1,7,8" for h in range(3)]
    with pytest.raises(DataError) as caught:
        load(write(tmp_path, "eight.csv", lines))
    message = str(caught.value)
    assert "no header and 8 columns" in message
    assert """--set 'data.columns={time="column 1", open="column 2", high="column 3", low="column 4", close="column 5", volume=""}'""" in message
    mapped = {"time": "column 1", "open": "column 2", "high": "column 3", "low": "column 4", "close": "column 5", "volume": "column 7"}
    market = load(str(tmp_path / "eight.csv"), columns=mapped)
    np.testing.assert_array_equal(market.volume, [7, 7, 7])
    assert ("volume", "column 7") in market.report.columns


def test_thousands_or_decimal_comma_is_ambiguous_and_names_the_decimal_key(tmp_path):
    lines = ["Date;Open;High;Low;Close;Volume", *(f"0{d}.01.2017;1,100;1,200;1,000;1,150;5" for d in range(2, 5))]
    with pytest.raises(DataError) as caught:
        load(write(tmp_path, "thousands.csv", lines))
    assert """--set 'data.decimal=","'""" in str(caught.value) and """--set 'data.decimal="."'""" in str(caught.value)
    market = load(str(tmp_path / "thousands.csv"), decimal=",")
    np.testing.assert_array_equal(market.close, [1.15, 1.15, 1.15])


def test_day_month_order_names_the_timestamp_format_key(tmp_path):
    with pytest.raises(DataError) as caught:
        load(write(tmp_path, "dm.csv", ["Date,Open,High,Low,Close,Volume", *rows(["01/02/2017", "02/02/2017", "03/02/2017"])]))
    message = str(caught.value)
    assert "--set 'data.timestamp_format=\"%m/%d/%Y\"'" in message and "--set 'data.timestamp_format=\"%d/%m/%Y\"'" in message


def test_a_file_newest_first_says_so(tmp_path):
    lines = ["date,open,high,low,close,volume", *reversed(rows([f"2017-01-02 0{h}:00" for h in range(3)]))]
    with pytest.raises(DataError, match="the file runs newest first"):
        load(write(tmp_path, "desc.csv", lines))


def test_an_explicit_delimiter_wins_and_a_wrong_one_is_named(tmp_path):
    path = write(tmp_path, "semi.csv", ["time;open;high;low;close;volume", *rows([f"2017-01-02 0{h}:00" for h in range(3)], sep=";")])
    assert_bars(load(path, delimiter=";"))
    with pytest.raises(DataError, match="data.delimiter"):
        load(path, delimiter="\t")


def test_txt_and_tsv_extensions_are_text_files(tmp_path):
    lines = rows([f"2017.01.02\t0{h}:00" for h in range(3)], sep="\t")
    for name in ("EURUSD60.txt", "EURUSD60.tsv"):
        assert_bars(load(write(tmp_path, name, lines)))


def test_volume_column_absent_by_an_empty_mapping_as_toml_writes_it(tmp_path):
    market = load(write(tmp_path, "fx.csv", ["time,open,high,low,close", *rows(["2017-01-02 00:00", "2017-01-02 01:00", "2017-01-02 02:00"], volume=False)]),
                  columns={"volume": ""})
    assert_bars(market, bars=np.column_stack([BARS[:, :4], np.zeros(3)]))
    assert OHLCV.VOLUME == 4
