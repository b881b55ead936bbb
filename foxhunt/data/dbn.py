"""Databento DBN files: OHLCV bars, MBP-10 book snapshots and trades.

``databento-dbn`` is an optional dependency (``pip install foxhunt[dbn]``) and is
imported only when a DBN file is loaded. Records are decoded by the library
(which also upgrades older DBN versions) and viewed as numpy structured arrays
through each record class's own dtype, so large files need no per-field Python
work.

Bar timestamps label the bar's open, as Databento's OHLCV schemas do. MBP-10 and
trades records are bucketed by ``ts_recv`` (the order Databento delivers them in);
an MBP-10 bar is a mid-price bar whose volume is the traded size of the bar's
trade events, and whose ``book`` row is the book at the bar's last event.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import ModuleType

import numpy as np

from foxhunt.data.assemble import build_market
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.market import BOOK, FLOW, OHLCV, MarketData
from foxhunt.data.validate import plain_row_label
from foxhunt.errors import DataError

__all__ = ["load_dbn", "parse_bar", "order_flow_imbalance", "PRICE_SCALE"]

PRICE_SCALE = 1e-9  # DBN prices are fixed-point integers in units of 1e-9
_UNITS = {"s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86_400 * 10**9}
_LEVELS = 10


def _dbn() -> ModuleType:
    try:
        import databento_dbn
    except ImportError:
        raise DataError(
            "reading Databento DBN files needs the optional package databento-dbn: run `pip install foxhunt[dbn]`"
        ) from None
    return databento_dbn


def parse_bar(bar: str) -> int:
    """A bar length such as '1s', '5m', '1h' or '1d', in nanoseconds."""
    match = re.fullmatch(r"(\d+)([smhd])", bar.strip())
    if not match or int(match.group(1)) == 0:
        raise DataError(f"bar length {bar!r} is not valid; write a positive count and a unit, e.g. '1s', '5m', '1h', '1d'")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _records(db: ModuleType, path: Path) -> tuple[object, list]:
    compression = db.Compression.ZSTD if path.name.endswith(".zst") else db.Compression.NONE
    decoder = db.DBNDecoder(compression=compression)
    try:
        decoder.write(path.read_bytes())
        decoded = decoder.decode()
    except (db.DBNError, OSError, ValueError) as error:
        raise DataError(f"{path}: cannot decode as DBN ({error}). Check the file is complete DBN (.dbn or .dbn.zst)") from None
    if not decoded or not isinstance(decoded[0], db.Metadata):
        raise DataError(f"{path}: no DBN metadata header. The file must start with DBN metadata")
    return decoded[0], decoded[1:]


def _structured(records: list, record_type: type) -> np.ndarray:
    dtype = np.dtype(record_type._dtypes)
    return np.frombuffer(b"".join(bytes(record) for record in records), dtype=dtype)


def _one_instrument(path: Path, rows: np.ndarray, instrument_id: int | None) -> np.ndarray:
    ids = np.unique(rows["instrument_id"])
    if instrument_id is not None:
        chosen = rows[rows["instrument_id"] == instrument_id]
        if chosen.size == 0:
            raise DataError(f"{path}: column 'instrument_id': no records for instrument_id {instrument_id}; the file has {ids.tolist()}")
        return chosen
    if ids.size > 1:
        raise DataError(
            f"{path}: column 'instrument_id': the file mixes instruments {ids.tolist()}; pass instrument_id= to load one of them"
        )
    return rows


def load_dbn(
    path: str | os.PathLike,
    bar: str = "1m",
    instrument: InstrumentSpec | str | None = None,
    instrument_id: int | None = None,
) -> MarketData:
    """Load a DBN file of schema ohlcv-1s/1m/1h/1d, mbp-10 or trades.

    ``bar`` is the bar length MBP-10 and trades are aggregated to (ignored for
    OHLCV schemas). ``instrument_id`` selects one instrument in a multi-instrument
    file. Errors name the file, the 1-based record and the field.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file. Check the path (relative paths are taken from the working directory)")
    db = _dbn()
    metadata, records = _records(db, path)
    schema = str(metadata.schema.value) if metadata.schema is not None else "mixed"
    if schema.startswith("ohlcv-") and schema != "ohlcv-eod":
        kind = [r for r in records if isinstance(r, db.OHLCVMsg)]
        return _ohlcv(path, _one_instrument(path, _structured(kind, db.OHLCVMsg), instrument_id), schema, instrument)
    if schema == "trades":
        kind = [r for r in records if isinstance(r, db.TradeMsg)]
        return _trades(path, _one_instrument(path, _structured(kind, db.TradeMsg), instrument_id), parse_bar(bar), bar, instrument)
    if schema == "mbp-10":
        kind = [r for r in records if isinstance(r, db.MBP10Msg)]
        return _mbp10(path, _one_instrument(path, _structured(kind, db.MBP10Msg), instrument_id), parse_bar(bar), bar, instrument)
    raise DataError(
        f"{path}: DBN schema {schema!r} is not supported; foxhunt reads ohlcv-1s, ohlcv-1m, ohlcv-1h, ohlcv-1d, mbp-10 and trades"
    )


def _prices(rows: np.ndarray, field: str) -> np.ndarray:
    raw = rows[field].astype(np.int64)
    return np.where(raw == np.iinfo(np.int64).max, np.nan, raw * PRICE_SCALE)


def _ohlcv(path: Path, rows: np.ndarray, schema: str, instrument: InstrumentSpec | str | None) -> MarketData:
    if rows.size == 0:
        raise DataError(f"{path}: the {schema} file has no bar records")
    ohlcv = np.empty((rows.size, OHLCV.size()))
    for field, name in ((OHLCV.OPEN, "open"), (OHLCV.HIGH, "high"), (OHLCV.LOW, "low"), (OHLCV.CLOSE, "close")):
        ohlcv[:, field] = _prices(rows, name)
    ohlcv[:, OHLCV.VOLUME] = rows["volume"].astype(np.float64)
    return build_market(
        str(path), rows["ts_event"].astype(np.int64), ohlcv,
        names=("open", "high", "low", "close", "volume"), time_column="ts_event",
        label=plain_row_label("record"), instrument=instrument, notes=(f"DBN {schema} bars",),
    )


def _buckets(path: Path, rows: np.ndarray, bar_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Bucket start times and the first record index of each bucket (records must be in ts_recv order)."""
    stamps = rows["ts_recv"].astype(np.int64)
    backwards = np.flatnonzero(np.diff(stamps) < 0)
    if backwards.size:
        i = int(backwards[0]) + 1
        raise DataError(
            f"{path}: record {i + 1}, column 'ts_recv': records go back in time; foxhunt expects DBN records in "
            "receive order, as Databento delivers them. Re-download or merge the file in ts_recv order"
        )
    bucket = stamps // bar_ns
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    return bucket[starts] * bar_ns, starts


def _flow(rows: np.ndarray, is_trade: np.ndarray, starts: np.ndarray) -> np.ndarray:
    size = np.where(is_trade, rows["size"].astype(np.float64), 0.0)
    side = rows["side"]
    flow = np.empty((starts.size, FLOW.size()))
    flow[:, FLOW.BUY_VOLUME] = np.add.reduceat(np.where(side == b"B", size, 0.0), starts)
    flow[:, FLOW.SELL_VOLUME] = np.add.reduceat(np.where(side == b"A", size, 0.0), starts)
    flow[:, FLOW.TRADES] = np.add.reduceat(is_trade.astype(np.float64), starts)
    return flow


def _bar_ohlc(price: np.ndarray, starts: np.ndarray) -> np.ndarray:
    ends = np.r_[starts[1:], price.size] - 1
    ohlcv = np.empty((starts.size, OHLCV.size()))
    ohlcv[:, OHLCV.OPEN] = price[starts]
    ohlcv[:, OHLCV.HIGH] = np.maximum.reduceat(price, starts)
    ohlcv[:, OHLCV.LOW] = np.minimum.reduceat(price, starts)
    ohlcv[:, OHLCV.CLOSE] = price[ends]
    return ohlcv


def _trades(path: Path, rows: np.ndarray, bar_ns: int, bar: str, instrument: InstrumentSpec | str | None) -> MarketData:
    rows = rows[rows["action"] == b"T"]
    if rows.size == 0:
        raise DataError(f"{path}: the trades file has no trade records (action 'T')")
    price = _prices(rows, "price")
    bad = np.flatnonzero(~(price > 0))
    if bad.size:
        raise DataError(f"{path}: record {int(bad[0]) + 1}, column 'price': trade price is undefined or not positive. Remove that record")
    times, starts = _buckets(path, rows, bar_ns)
    ohlcv = _bar_ohlc(price, starts)
    ohlcv[:, OHLCV.VOLUME] = np.add.reduceat(rows["size"].astype(np.float64), starts)
    return build_market(
        str(path), times, ohlcv, names=("price", "price", "price", "price", "size"), time_column="ts_recv",
        label=plain_row_label("bar"), instrument=instrument,
        notes=(f"DBN trades aggregated to {bar} bars from {rows.size} trades",),
        flow=_flow(rows, np.ones(rows.size, dtype=bool), starts),
    )


def _mbp10(path: Path, rows: np.ndarray, bar_ns: int, bar: str, instrument: InstrumentSpec | str | None) -> MarketData:
    bid = _prices(rows, "bid_px_00")
    ask = _prices(rows, "ask_px_00")
    two_sided = np.isfinite(bid) & np.isfinite(ask)
    skipped = int(rows.size - np.count_nonzero(two_sided))
    rows, bid, ask = rows[two_sided], bid[two_sided], ask[two_sided]
    if rows.size == 0:
        raise DataError(f"{path}: columns 'bid_px_00'/'ask_px_00': no MBP-10 record has both a best bid and a best ask")
    times, starts = _buckets(path, rows, bar_ns)
    ends = np.r_[starts[1:], rows.size] - 1
    is_trade = rows["action"] == b"T"
    ohlcv = _bar_ohlc((bid + ask) / 2.0, starts)
    ohlcv[:, OHLCV.VOLUME] = np.add.reduceat(np.where(is_trade, rows["size"].astype(np.float64), 0.0), starts)
    bid_size = rows["bid_sz_00"].astype(np.float64)
    ask_size = rows["ask_sz_00"].astype(np.float64)
    bid_depth = sum(rows[f"bid_sz_{level:02d}"].astype(np.float64) for level in range(_LEVELS))
    ask_depth = sum(rows[f"ask_sz_{level:02d}"].astype(np.float64) for level in range(_LEVELS))
    book = np.empty((starts.size, BOOK.size()))
    book[:, BOOK.BID_PRICE] = bid[ends]
    book[:, BOOK.ASK_PRICE] = ask[ends]
    book[:, BOOK.BID_SIZE] = bid_size[ends]
    book[:, BOOK.ASK_SIZE] = ask_size[ends]
    book[:, BOOK.BID_DEPTH] = bid_depth[ends]
    book[:, BOOK.ASK_DEPTH] = ask_depth[ends]
    book[:, BOOK.OFI] = np.add.reduceat(order_flow_imbalance(bid, bid_size, ask, ask_size), starts)
    notes = [f"DBN mbp-10 aggregated to {bar} mid-price bars from {rows.size} book events"]
    if skipped:
        notes.append(f"{skipped} MBP-10 record(s) with an empty side of the book were not used for prices")
    return build_market(
        str(path), times, ohlcv, names=("mid", "mid", "mid", "mid", "size"), time_column="ts_recv",
        label=plain_row_label("bar"), instrument=instrument, notes=notes,
        book=book, flow=_flow(rows, is_trade, starts),
    )


def order_flow_imbalance(bid: np.ndarray, bid_size: np.ndarray, ask: np.ndarray, ask_size: np.ndarray) -> np.ndarray:
    """Per-event order-flow imbalance of Cont, Kukanov and Stoikov (2014) at the best level.

    e_n = 1{b_n >= b_(n-1)} q^b_n - 1{b_n <= b_(n-1)} q^b_(n-1)
        - 1{a_n <= a_(n-1)} q^a_n + 1{a_n >= a_(n-1)} q^a_(n-1); the first event contributes 0.
    """
    e = np.zeros(bid.shape)
    e[1:] = (
        np.where(bid[1:] >= bid[:-1], bid_size[1:], 0.0)
        - np.where(bid[1:] <= bid[:-1], bid_size[:-1], 0.0)
        - np.where(ask[1:] <= ask[:-1], ask_size[1:], 0.0)
        + np.where(ask[1:] >= ask[:-1], ask_size[:-1], 0.0)
    )
    return e
