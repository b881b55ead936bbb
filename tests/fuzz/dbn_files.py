"""Valid Databento DBN files of each schema foxhunt reads, and mutations of their records, for the fuzzing suite.

Records are written with databento-dbn's own classes (as tests/data/test_dbn.py does) from valid bars,
then mutated: any field of any record overwritten with random bytes or a special value (DBN's undefined
price and time, values past int64, the length and record-type bytes included), records swapped,
dropped or duplicated; the file may be damaged byte by byte, compressed as a finished or an unfinished
zstd frame (what Transcoder.flush leaves), and named .dbn or .dbn.zst whatever it holds.
"""

from __future__ import annotations

import io

import databento_dbn as db  # the optional extra is in the test dependencies
import numpy as np
import pyarrow as pa
from fuzz_inputs import Bars, bars, byte_damage, damage
from hypothesis import strategies as st

from foxhunt.data import OHLCV

__all__ = ["SCHEMAS", "SCALE", "compress", "dbn_files", "metadata"]

SCHEMAS = {
    "ohlcv-1s": (db.Schema.OHLCV_1S, db.RType.OHLCV_1S),
    "ohlcv-1m": (db.Schema.OHLCV_1M, db.RType.OHLCV_1M),
    "ohlcv-1h": (db.Schema.OHLCV_1H, db.RType.OHLCV_1H),
    "ohlcv-1d": (db.Schema.OHLCV_1D, db.RType.OHLCV_1D),
    "trades": (db.Schema.TRADES, None),
    "mbp-10": (db.Schema.MBP_10, None),
}
RECORD_TYPES = {"trades": db.TradeMsg, "mbp-10": db.MBP10Msg}
SCALE = 10**9


def metadata(schema: db.Schema, start: int) -> bytes:
    return bytes(db.Metadata(dataset="GLBX.MDP3", start=start, stype_in=db.SType.RAW_SYMBOL,
                             stype_out=db.SType.INSTRUMENT_ID, schema=schema, symbols=["ESH4"]))


def px(value: float) -> int:
    return int(round(value * SCALE))


def records(schema: str, data: Bars) -> list:
    """Valid records of ``schema`` for ``data``: bars as they are, or events whose bars are ``data``'s."""
    stamps = data.seconds * SCALE
    if schema.startswith("ohlcv"):
        rtype = SCHEMAS[schema][1]
        return [db.OHLCVMsg(rtype, 1, 42, int(t), *(px(v) for v in row[:4]), int(row[OHLCV.VOLUME]))
                for t, row in zip(stamps, data.ohlcv)]  # fmt: skip
    out = []
    for t, row in zip(stamps, data.ohlcv):
        for offset, price in enumerate((row[OHLCV.OPEN], row[OHLCV.HIGH], row[OHLCV.LOW], row[OHLCV.CLOSE])):
            time = int(t) + offset
            if schema == "trades":
                out.append(db.TradeMsg(1, 42, time, px(price), 1 + offset, db.Action.TRADE, db.Side.BID, 0, time))
            else:
                levels = [db.BidAskPair(px(price * (1 - 1e-4 * (i + 1))), px(price * (1 + 1e-4 * (i + 1))), 5 + i, 7 + i, 1, 1)
                          for i in range(10)]  # fmt: skip
                action = db.Action.TRADE if offset == 3 else db.Action.ADD
                out.append(db.MBP10Msg(1, 42, time, px(price), 2, action, db.Side.ASK, 0, time, levels=levels))
    return out


def _dtype(schema: str) -> np.dtype:
    return np.dtype((db.OHLCVMsg if schema.startswith("ohlcv") else RECORD_TYPES[schema])._dtypes)


_RECORD_MUTATION = st.one_of(
    st.tuples(st.just("field"), st.integers(0, 999), st.integers(0, 99), st.binary(min_size=8, max_size=8)),
    st.tuples(st.just("special"), st.integers(0, 999), st.integers(0, 99),
              st.sampled_from([2**63 - 1, 2**64 - 1, 2**63, 0, 1, 2**62, 2**32 - 1])),
    st.tuples(st.just("swap"), st.integers(0, 999), st.integers(0, 999)),
    st.tuples(st.just("drop"), st.integers(0, 999)),
    st.tuples(st.just("duplicate"), st.integers(0, 999)),
)


def mutate_records(schema: str, body: bytes, mutations: list[tuple]) -> bytes:
    """Mutations of whole records and of their fields, by the record type's own layout."""
    dtype = _dtype(schema)
    rows = [bytearray(body[i : i + dtype.itemsize]) for i in range(0, len(body), dtype.itemsize)]
    for kind, *args in mutations:
        if not rows:
            break
        i = args[0] % len(rows)
        if kind in ("field", "special"):
            name = dtype.names[args[1] % len(dtype.names)]
            kind_of, offset = dtype.fields[name][:2]
            raw = args[2] if kind == "field" else (args[2] % 2**64).to_bytes(8, "little")
            rows[i][offset : offset + kind_of.itemsize] = raw[: kind_of.itemsize]
        elif kind == "swap":
            j = args[1] % len(rows)
            rows[i], rows[j] = rows[j], rows[i]
        elif kind == "drop":
            del rows[i]
        elif kind == "duplicate":
            rows.insert(i, bytearray(rows[i]))
    return b"".join(bytes(row) for row in rows)


def compress(raw: bytes, how: str) -> bytes:
    if how == "finished":
        return pa.Codec("zstd").compress(raw, asbytes=True)
    buffer = io.BytesIO()  # unfinished: what databento-dbn's Transcoder writes before it is dropped
    transcoder = db.Transcoder(buffer, db.Encoding.DBN, db.Compression.ZSTD)
    try:
        transcoder.write(raw)
        transcoder.flush()
    except db.DBNError:
        return pa.Codec("zstd").compress(raw, asbytes=True)  # the transcoder refuses what it cannot frame
    return buffer.getvalue()


@st.composite
def dbn_files(draw: st.DrawFn) -> tuple[bytes, str]:
    schema = draw(st.sampled_from(list(SCHEMAS)))
    data: Bars = draw(bars(max_bars=12))
    body = b"".join(bytes(record) for record in records(schema, data))
    body = mutate_records(schema, body, draw(st.lists(_RECORD_MUTATION, max_size=4)))
    raw = metadata(SCHEMAS[schema][0], int(data.seconds[0]) * SCALE) + body
    if draw(st.booleans()):
        raw = damage(raw, draw(byte_damage()))
    how = draw(st.sampled_from(["none", "finished", "unfinished"]))
    written = raw if how == "none" else compress(raw, how)
    if how != "none" and draw(st.booleans()):
        written = damage(written, draw(byte_damage(2)))
    suffix = draw(st.sampled_from([".dbn", ".dbn.zst"])) if draw(st.integers(0, 9)) == 0 else (".dbn" if how == "none" else ".dbn.zst")
    return written, suffix
