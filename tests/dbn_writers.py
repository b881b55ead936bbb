"""Databento DBN files written with databento-dbn's own encoder (the loader's tests and the feature plugins')."""

from __future__ import annotations

import io

import databento_dbn as db  # the optional extra is in the test dependencies

SCALE = 10**9
MINUTE = 60 * SCALE
T0 = 1_704_187_800 * SCALE  # 2024-01-02 09:30 UTC


def metadata(schema) -> bytes:
    return bytes(
        db.Metadata(dataset="GLBX.MDP3", start=T0, stype_in=db.SType.RAW_SYMBOL, stype_out=db.SType.INSTRUMENT_ID, schema=schema, symbols=["ESH4"])
    )


def write(path, schema, records, compress=False):
    raw = metadata(schema) + b"".join(bytes(r) for r in records)
    if compress:
        buffer = io.BytesIO()
        transcoder = db.Transcoder(buffer, db.Encoding.DBN, db.Compression.ZSTD)
        transcoder.write(raw)
        transcoder.flush()
        raw = buffer.getvalue()
    path.write_bytes(raw)
    return path


def px(value: float) -> int:
    return int(round(value * SCALE))


def book_levels(bid, ask, bid_size, ask_size):
    return [db.BidAskPair(px(bid - 0.25 * i), px(ask + 0.25 * i), bid_size + i, ask_size + 2 * i, 1, 1) for i in range(10)]
