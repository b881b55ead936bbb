"""Databento DBN files written with databento-dbn's own encoder, loaded back."""

from __future__ import annotations

import sys

import databento_dbn as db  # the optional extra is in the test dependencies
import numpy as np
import pytest

from foxhunt.data import BOOK, FLOW, LEVEL, OHLCV, DataConfig, load, load_dbn, load_from_config
from foxhunt.errors import DataError
from dbn_writers import MINUTE, SCALE, T0, book_levels, metadata, px, write

BARS = [  # open, high, low, close, volume
    (4700.00, 4702.50, 4699.25, 4701.00, 1200),
    (4701.00, 4703.00, 4700.50, 4702.25, 900),
    (4702.25, 4702.75, 4698.00, 4699.50, 1500),
]


@pytest.mark.parametrize(("schema", "rtype", "step"), [
    (db.Schema.OHLCV_1M, db.RType.OHLCV_1M, MINUTE),
    (db.Schema.OHLCV_1H, db.RType.OHLCV_1H, 60 * MINUTE),
    (db.Schema.OHLCV_1D, db.RType.OHLCV_1D, 1440 * MINUTE),
    (db.Schema.OHLCV_1S, db.RType.OHLCV_1S, SCALE),
])  # fmt: skip
@pytest.mark.parametrize("compress", [False, True])
def test_ohlcv_schemas_round_trip(tmp_path, schema, rtype, step, compress):
    records = [db.OHLCVMsg(rtype, 1, 42, T0 + i * step, *(px(v) for v in bar[:4]), bar[4]) for i, bar in enumerate(BARS)]
    path = write(tmp_path / ("bars.dbn.zst" if compress else "bars.dbn"), schema, records, compress)
    market = load(str(path), "ES")
    np.testing.assert_allclose(market.ohlcv, np.array(BARS, dtype=float))
    assert market.timestamps[1] - market.timestamps[0] == np.timedelta64(step, "ns")
    assert market.instrument.symbol == "ES"


def test_invalid_bar_names_the_record_and_field(tmp_path):
    bars = [BARS[0], (4701.0, 4699.0, 4700.5, 4700.0, 10), BARS[2]]
    records = [db.OHLCVMsg(db.RType.OHLCV_1M, 1, 42, T0 + i * MINUTE, *(px(v) for v in bar[:4]), bar[4]) for i, bar in enumerate(bars)]
    path = write(tmp_path / "bad.dbn", db.Schema.OHLCV_1M, records)
    with pytest.raises(DataError, match=r"bad\.dbn: record 2, column 'high': high 4699\.0 is below low 4700\.5"):
        load_dbn(path)


def test_mixed_instruments_need_a_choice(tmp_path):
    records = [db.OHLCVMsg(db.RType.OHLCV_1M, 1, 40 + i % 2, T0 + i * MINUTE, *(px(v) for v in BARS[0][:4]), 1) for i in range(4)]
    path = write(tmp_path / "mixed.dbn", db.Schema.OHLCV_1M, records)
    with pytest.raises(DataError, match=r"mixes instruments \[40, 41\]; load one of them with --set data.instrument_id=40"):
        load_dbn(path)
    assert len(load_dbn(path, instrument_id=41)) == 2
    chosen = load_from_config(DataConfig(source=str(path), instrument_id=41))  # the key the error names
    assert len(chosen) == 2
    assert chosen.report.layout == "Databento DBN, schema ohlcv-1m"
    assert chosen.report.timestamps.startswith("ts_event: UTC nanoseconds")


TRADES = [  # (seconds after T0, price, size, aggressor side)
    (1, 4700.00, 3, db.Side.BID),
    (20, 4701.25, 1, db.Side.ASK),
    (59, 4700.50, 2, db.Side.BID),
    (61, 4702.00, 5, db.Side.ASK),
    (65, 4699.75, 4, db.Side.NONE),
    (190, 4700.25, 7, db.Side.BID),  # minute 3; minute 2 has no trades
]


def test_trades_aggregate_to_bars_with_flow(tmp_path):
    records = [
        db.TradeMsg(1, 42, T0 + s * SCALE, px(p), size, db.Action.TRADE, side, 0, T0 + s * SCALE + 1000)
        for s, p, size, side in TRADES
    ]
    market = load_dbn(write(tmp_path / "trades.dbn", db.Schema.TRADES, records), bar="1m")
    expected = np.array([
        [4700.00, 4701.25, 4700.00, 4700.50, 6],
        [4702.00, 4702.00, 4699.75, 4699.75, 9],
        [4700.25, 4700.25, 4700.25, 4700.25, 7],
    ])  # fmt: skip
    np.testing.assert_allclose(market.ohlcv, expected)
    np.testing.assert_array_equal(market.timestamps, (T0 + np.array([0, 1, 3]) * MINUTE).astype("datetime64[ns]"))
    np.testing.assert_array_equal(market.flow[:, FLOW.BUY_VOLUME], [5, 0, 7])
    np.testing.assert_array_equal(market.flow[:, FLOW.SELL_VOLUME], [1, 5, 0])
    np.testing.assert_array_equal(market.flow[:, FLOW.TRADES], [3, 2, 1])
    assert [g.missing_bars for g in market.report.gaps] == [1]
    assert market.book is None


# (seconds, action, side, trade size, best bid, best ask, bid size, ask size)
EVENTS = [
    (0, db.Action.ADD, db.Side.BID, 0, 4700.00, 4700.25, 10, 12),
    (10, db.Action.TRADE, db.Side.BID, 4, 4700.00, 4700.25, 10, 8),
    (30, db.Action.ADD, db.Side.BID, 0, 4700.25, 4700.50, 6, 9),
    (70, db.Action.CANCEL, db.Side.ASK, 0, 4700.25, 4700.50, 6, 5),
    (80, db.Action.TRADE, db.Side.ASK, 3, 4700.00, 4700.50, 11, 5),
    (100, db.Action.ADD, db.Side.BID, 0, 4700.00, 4700.25, 11, 7),
]


def reference_ofi(events):
    """Cont-Kukanov-Stoikov OFI written out event by event, independently of the loader."""
    values = [0.0]
    for (_, _, _, _, b0, a0, qb0, qa0), (_, _, _, _, b1, a1, qb1, qa1) in zip(events, events[1:]):
        e = 0.0
        e += qb1 if b1 >= b0 else 0.0
        e -= qb0 if b1 <= b0 else 0.0
        e -= qa1 if a1 <= a0 else 0.0
        e += qa0 if a1 >= a0 else 0.0
        values.append(e)
    return values


def test_mbp10_aggregates_to_mid_bars_with_book_fields(tmp_path):
    records = [
        db.MBP10Msg(1, 42, T0 + s * SCALE, px(b if side == db.Side.BID else a), size, action, side, 0, T0 + s * SCALE,
                    levels=book_levels(b, a, qb, qa))
        for s, action, side, size, b, a, qb, qa in EVENTS
    ]  # fmt: skip
    market = load(str(write(tmp_path / "book.dbn", db.Schema.MBP_10, records)), bar="1m")
    mids = [(b + a) / 2 for _, _, _, _, b, a, _, _ in EVENTS]
    first_bar, second_bar = 0, 1  # events 0-2 fall in the first minute, 3-5 in the second
    np.testing.assert_allclose(market.ohlcv[first_bar], [mids[0], max(mids[:3]), min(mids[:3]), mids[2], 4])
    np.testing.assert_allclose(market.ohlcv[second_bar], [mids[3], max(mids[3:]), min(mids[3:]), mids[5], 3])
    _, _, _, _, bid, ask, bid_size, ask_size = EVENTS[-1]
    closing_book = market.book[second_bar]
    np.testing.assert_allclose(closing_book[BOOK.BID_PRICE], bid)
    np.testing.assert_allclose(closing_book[BOOK.ASK_PRICE], ask)
    assert closing_book[BOOK.BID_SIZE] == bid_size and closing_book[BOOK.ASK_SIZE] == ask_size
    assert closing_book[BOOK.BID_DEPTH] == sum(bid_size + i for i in range(10))
    assert closing_book[BOOK.ASK_DEPTH] == sum(ask_size + 2 * i for i in range(10))
    ofi = reference_ofi(EVENTS)
    np.testing.assert_allclose(market.book[:, BOOK.OFI], [sum(ofi[:3]), sum(ofi[3:])])
    np.testing.assert_array_equal(market.flow[:, FLOW.BUY_VOLUME], [4, 0])
    np.testing.assert_array_equal(market.flow[:, FLOW.SELL_VOLUME], [0, 3])
    assert market.ohlcv[:, OHLCV.VOLUME].tolist() == [4, 3]
    # every level at each bar's close (book_levels: level i at bid - i/4 and ask + i/4, sizes q + i and q + 2 i)
    for bar, (_, _, _, _, b, a, qb, qa) in zip((first_bar, second_bar), (EVENTS[2], EVENTS[5])):
        i = np.arange(10)
        np.testing.assert_allclose(market.levels[bar, :, LEVEL.BID_PRICE], b - 0.25 * i)
        np.testing.assert_allclose(market.levels[bar, :, LEVEL.ASK_PRICE], a + 0.25 * i)
        np.testing.assert_array_equal(market.levels[bar, :, LEVEL.BID_SIZE], qb + i)
        np.testing.assert_array_equal(market.levels[bar, :, LEVEL.ASK_SIZE], qa + 2 * i)


def test_unsupported_schema_and_missing_package(tmp_path, monkeypatch):
    path = write(tmp_path / "mbp1.dbn", db.Schema.MBP_1, [])
    with pytest.raises(DataError, match="schema 'mbp-1' is not supported"):
        load_dbn(path)
    monkeypatch.setitem(sys.modules, "databento_dbn", None)
    with pytest.raises(DataError, match=r"pip install foxhunt\[dbn\]"):
        load_dbn(path)


def bar_records(count: int = 3) -> list:
    return [db.OHLCVMsg(db.RType.OHLCV_1M, 1, 42, T0 + i * MINUTE, *(px(v) for v in BARS[i % 3][:4]), BARS[i % 3][4]) for i in range(count)]


def finished_zstd(raw: bytes) -> bytes:
    """One complete zstd frame (Transcoder.flush leaves the frame open; Databento's downloads are complete)."""
    import pyarrow as pa

    return pa.Codec("zstd").compress(raw, asbytes=True)


def test_a_complete_zstd_frame_loads_like_the_uncompressed_file(tmp_path):
    raw = metadata(db.Schema.OHLCV_1M) + b"".join(bytes(r) for r in bar_records())
    (tmp_path / "bars.dbn.zst").write_bytes(finished_zstd(raw))
    (tmp_path / "bars.dbn").write_bytes(raw)
    np.testing.assert_array_equal(load_dbn(tmp_path / "bars.dbn.zst").ohlcv, load_dbn(tmp_path / "bars.dbn").ohlcv)


@pytest.mark.parametrize("compress", [False, True])
def test_a_record_shorter_than_its_type_is_refused_not_a_rust_panic(tmp_path, compress):
    """databento-dbn's decoder panicked (a BaseException with a Rust message on stderr) on this."""
    body = bytearray(b"".join(bytes(r) for r in bar_records()))
    body[112] = 12  # the third bar says it is 48 bytes long, and the file ends there; an OHLCV record has 56
    raw = metadata(db.Schema.OHLCV_1M) + bytes(body[:160])
    path = tmp_path / ("short.dbn.zst" if compress else "short.dbn")
    path.write_bytes(finished_zstd(raw) if compress else raw)
    with pytest.raises(DataError, match=r"record 3: 48 bytes long, shorter than a OHLCVMsg \(56 bytes\); the file is damaged"):
        load_dbn(path)


def test_damaged_zstd_is_one_error(tmp_path):
    """Random bytes inside a .dbn.zst used to be a RuntimeError from the decoder ('Data corruption detected')."""
    data = bytearray(finished_zstd(metadata(db.Schema.OHLCV_1M) + b"".join(bytes(r) for r in bar_records(40))))
    data[len(data) // 2 : len(data) // 2 + 8] = b"\xff" * 8
    path = tmp_path / "damaged.dbn.zst"
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"damaged\.dbn\.zst: "):
        load_dbn(path)


def test_records_longer_than_their_type_are_read_by_their_fields(tmp_path):
    """A record may carry more than its type (ts_out appends 8 bytes); reading them used to fail on the buffer size."""
    body = b""
    for record in bar_records():
        raw = bytearray(bytes(record))
        raw[0] = (len(raw) + 8) // 4
        body += bytes(raw) + (7).to_bytes(8, "little")
    path = tmp_path / "longer.dbn"
    path.write_bytes(metadata(db.Schema.OHLCV_1M) + body)
    np.testing.assert_allclose(load_dbn(path).ohlcv, np.array(BARS, dtype=float))


def test_an_undefined_timestamp_names_the_record(tmp_path):
    """2**64 - 1 (DBN's undefined time) cast to int64 became 1969-12-31T23:59:59.999999999."""
    records = bar_records()
    records[2] = db.OHLCVMsg(db.RType.OHLCV_1M, 1, 42, 2**64 - 1, *(px(v) for v in BARS[2][:4]), BARS[2][4])
    path = write(tmp_path / "undefined.dbn", db.Schema.OHLCV_1M, records)
    with pytest.raises(DataError, match=r"record 3, column 'ts_event': time 18446744073709551615 is undefined"):
        load_dbn(path)


def test_records_of_other_types_are_skipped_and_counted(tmp_path):
    trade = db.TradeMsg(1, 42, T0, px(4700.0), 1, db.Action.TRADE, db.Side.BID, 0, T0)
    records = bar_records()
    path = write(tmp_path / "mixed.dbn", db.Schema.OHLCV_1M, [records[0], trade, *records[1:]])
    market = load_dbn(path)
    np.testing.assert_allclose(market.ohlcv, np.array(BARS, dtype=float))
    assert "1 record(s) of other types (symbol mappings, system messages, ...) were not used" in market.report.notes
