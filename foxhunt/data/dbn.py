"""Databento DBN files: OHLCV bars, MBP-10 book snapshots and trades.

``databento-dbn`` is an optional dependency (``pip install foxhunt[dbn]``) and is
imported only when a DBN file is loaded. Records are not decoded one Python object at a time: the file's bytes are viewed
as numpy structured arrays through each record class's own dtype (identical in DBN
versions 1 to 3 for the three record types read here), after the framing of every
record has been checked (see :func:`_runs`); the library decodes only the metadata.

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
import pyarrow as pa

from foxhunt.data.assemble import build_market
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.market import BOOK, BOOK_LEVELS, FLOW, LEVEL, OHLCV, MarketData
from foxhunt.data.validate import plain_row_label
from foxhunt.errors import DataError

__all__ = ["load_dbn", "parse_bar", "order_flow_imbalance", "PRICE_SCALE"]

# DBN times are integer nanoseconds since the Unix epoch, UTC by the format's definition.
_TIME_NOTE = "{}: UTC nanoseconds (DBN times carry no zone to read)"

PRICE_SCALE = 1e-9  # DBN prices are fixed-point integers in units of 1e-9
_UNITS = {"s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86_400 * 10**9}
_LEVELS = BOOK_LEVELS
_HEADER_BYTES = 16  # length, rtype, publisher_id, instrument_id, ts_event
# Every OHLCV record type (the deprecated one of DBN version 1 included) in an ohlcv-* file is a bar.
_OHLCV_RTYPES = (0x11, 0x20, 0x21, 0x22, 0x23, 0x24)


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


def _read(db: ModuleType, path: Path) -> np.ndarray:
    """The file's bytes, decompressed for ``.zst``.

    zstd is read by arrow, whose errors are exceptions. A stream that was flushed but never finished (no
    end-of-frame marker, as databento-dbn's ``Transcoder`` leaves it until it is dropped) is complete data
    that arrow calls truncated; only then is the file decompressed by databento-dbn's own decoder.
    """
    try:
        if not path.name.endswith(".zst"):
            return np.frombuffer(path.read_bytes(), dtype=np.uint8)
        with pa.input_stream(str(path), compression="zstd") as stream:
            return np.frombuffer(stream.read(), dtype=np.uint8)
    except (pa.ArrowInvalid, OSError) as error:
        if "Truncated compressed stream" in str(error):
            return _read_unfinished_zstd(db, path)
        raise DataError(f"{path}: cannot read the file ({error}). Check the file is complete DBN (.dbn or zstd .dbn.zst)") from None


def _read_unfinished_zstd(db: ModuleType, path: Path) -> np.ndarray:
    """An unfinished zstd stream decoded by databento-dbn, and its records written back as the bytes of a DBN file.

    The decoder panics (a Rust panic, raised as a ``BaseException`` named ``PanicException``) on a record shorter
    than its type; that is caught here and refused like every other damaged file. Rust prints its own panic
    message on stderr first; a file arrow can read never gets here.
    """
    decoder = db.DBNDecoder(compression=db.Compression.ZSTD)
    try:
        decoder.write(path.read_bytes())
        decoded = decoder.decode()
    except (db.DBNError, OSError, ValueError, RuntimeError) as error:
        raise DataError(f"{path}: cannot decode as DBN ({error}). Check the file is complete DBN (.dbn or .dbn.zst)") from None
    except BaseException as error:
        if type(error).__name__ != "PanicException":
            raise
        raise DataError(f"{path}: cannot decode as DBN ({error}). The file is damaged: re-download it") from None
    if not decoded or not isinstance(decoded[0], db.Metadata):
        raise DataError(f"{path}: no DBN metadata header. The file must start with DBN metadata")
    return np.frombuffer(b"".join(bytes(record) for record in decoded), dtype=np.uint8)


def _metadata(db: ModuleType, path: Path, data: np.ndarray) -> tuple[object, int]:
    """The decoded metadata header and the byte offset where records start."""
    if data.size < 8 or bytes(data[:3]) != b"DBN":
        raise DataError(f"{path}: no DBN metadata header (a DBN file starts with 'DBN'). Check the file is DBN (.dbn or .dbn.zst)")
    end = 8 + int.from_bytes(bytes(data[4:8]), "little")
    if end > data.size:
        raise DataError(f"{path}: the metadata header says it is {end} bytes long, but the file has {data.size}; it is truncated")
    decoder = db.DBNDecoder()
    try:
        decoder.write(bytes(data[:end]))
        decoded = decoder.decode()
    except (db.DBNError, ValueError, RuntimeError) as error:
        raise DataError(f"{path}: cannot decode the DBN metadata header ({error}). Check the file is complete DBN") from None
    if not decoded or not isinstance(decoded[0], db.Metadata):
        raise DataError(f"{path}: no DBN metadata header. The file must start with DBN metadata")
    return decoded[0], end


def _runs(path: Path, body: np.ndarray) -> list[tuple[int, int, int]]:
    """The records' framing as runs of (offset, record length, count); a length that cannot be is a DataError.

    Each record starts with its length in 4-byte words. Checking every length here, before any record is read,
    is what keeps a damaged file from databento-dbn's decoder, which panics (a Rust panic, not an exception,
    with a message on stderr) on a record shorter than its type. A file of one record type is one run, found by
    probing ever longer strides, so the check costs a few vectorised passes, not a Python loop per record.
    """
    runs = []
    position, record = 0, 0
    while position < body.size:
        length = int(body[position]) * 4
        if length < _HEADER_BYTES or position + length > body.size:
            why = f"shorter than a record header ({_HEADER_BYTES})" if length < _HEADER_BYTES else "past the end of the file"
            raise DataError(
                f"{path}: record {record + 1}: its header gives a length of {length} bytes, {why}; "
                "the file is truncated or damaged. Re-download it"
            )
        count, probe = 1, 1
        while True:
            room = min(probe, (body.size - position) // length - count)
            if room <= 0:
                break
            same = body[position + count * length : position + (count + room) * length : length] == body[position]
            if not same.all():
                count += int(np.argmin(same))
                break
            count, probe = count + room, probe * 2
        runs.append((position, length, count))
        position, record = position + count * length, record + count
    return runs


def _padded(dtype: np.dtype, itemsize: int) -> np.dtype:
    """``dtype``'s fields at their offsets in a record of ``itemsize`` bytes (a record may carry more, e.g. ts_out)."""
    fields = [(name, *dtype.fields[name][:2]) for name in dtype.names]
    names, formats, offsets = zip(*fields)
    return np.dtype({"names": list(names), "formats": list(formats), "offsets": list(offsets), "itemsize": itemsize})


def _structured(path: Path, body: np.ndarray, rtypes: tuple[int, ...], record_type: type) -> tuple[np.ndarray, int]:
    """The records of ``rtypes`` as a structured array (a view of the file's bytes when they are all of them),
    and how many records of other types were skipped."""
    dtype = np.dtype(record_type._dtypes)
    parts, skipped, record = [], 0, 0
    for position, length, count in _runs(path, body):
        header = np.ndarray((count,), dtype=_padded(np.dtype([("length", "u1"), ("rtype", "u1")]), length), buffer=body, offset=position)
        wanted = np.isin(header["rtype"], rtypes)
        skipped += count - int(np.count_nonzero(wanted))
        if wanted.any():
            if length < dtype.itemsize:
                raise DataError(
                    f"{path}: record {record + int(np.argmax(wanted)) + 1}: {length} bytes long, shorter than a "
                    f"{record_type.__name__} ({dtype.itemsize} bytes); the file is damaged. Re-download it"
                )
            rows = np.ndarray((count,), dtype=_padded(dtype, length), buffer=body, offset=position)
            parts.append(rows if wanted.all() else rows[wanted])
        record += count
    if len(parts) == 1:
        return parts[0], skipped
    return np.concatenate([part.astype(dtype) for part in parts]) if parts else np.zeros(0, dtype), skipped


def _times(path: Path, rows: np.ndarray, field: str, kind: str) -> np.ndarray:
    """A uint64 time field as int64 nanoseconds; DBN's undefined time (2**64 - 1) and anything past 2262 are errors."""
    beyond = np.flatnonzero(rows[field] > np.iinfo(np.int64).max)
    if beyond.size:
        raise DataError(
            f"{path}: {kind} {int(beyond[0]) + 1}, column {field!r}: time {int(rows[field][beyond[0]])} is undefined or "
            "past 2262-04-11, the last nanosecond timestamp. Remove that record"
        )
    return rows[field].astype(np.int64)


def _one_instrument(path: Path, rows: np.ndarray, instrument_id: int | None) -> np.ndarray:
    ids = np.unique(rows["instrument_id"])
    if instrument_id is not None:
        chosen = rows[rows["instrument_id"] == instrument_id]
        if chosen.size == 0:
            raise DataError(f"{path}: column 'instrument_id': no records for instrument_id {instrument_id}; the file has {ids.tolist()}")
        return chosen
    if ids.size > 1:
        raise DataError(
            f"{path}: column 'instrument_id': the file mixes instruments {ids.tolist()}; load one of them with "
            f"--set data.instrument_id={ids[0]} (or another of the ids)"
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
    data = _read(db, path)
    metadata, start = _metadata(db, path, data)
    schema = str(metadata.schema.value) if metadata.schema is not None else "mixed"
    body = data[start:]
    if schema.startswith("ohlcv-") and schema != "ohlcv-eod":
        rows, skipped = _structured(path, body, _OHLCV_RTYPES, db.OHLCVMsg)
        return _ohlcv(path, _one_instrument(path, rows, instrument_id), schema, instrument, skipped)
    if schema == "trades":
        rows, skipped = _structured(path, body, (int(db.RType.MBP_0),), db.TradeMsg)
        return _trades(path, _one_instrument(path, rows, instrument_id), parse_bar(bar), bar, instrument, skipped)
    if schema == "mbp-10":
        rows, skipped = _structured(path, body, (int(db.RType.MBP_10),), db.MBP10Msg)
        return _mbp10(path, _one_instrument(path, rows, instrument_id), parse_bar(bar), bar, instrument, skipped)
    raise DataError(
        f"{path}: DBN schema {schema!r} is not supported; foxhunt reads ohlcv-1s, ohlcv-1m, ohlcv-1h, ohlcv-1d, mbp-10 and trades"
    )


def _prices(rows: np.ndarray, field: str) -> np.ndarray:
    raw = rows[field].astype(np.int64)
    return np.where(raw == np.iinfo(np.int64).max, np.nan, raw * PRICE_SCALE)


def _other_records(count: int) -> tuple[str, ...]:
    return (f"{count} record(s) of other types (symbol mappings, system messages, ...) were not used",) if count else ()


def _ohlcv(path: Path, rows: np.ndarray, schema: str, instrument: InstrumentSpec | str | None, other: int) -> MarketData:
    if rows.size == 0:
        raise DataError(f"{path}: the {schema} file has no bar records")
    ohlcv = np.empty((rows.size, OHLCV.size()))
    for field, name in ((OHLCV.OPEN, "open"), (OHLCV.HIGH, "high"), (OHLCV.LOW, "low"), (OHLCV.CLOSE, "close")):
        ohlcv[:, field] = _prices(rows, name)
    ohlcv[:, OHLCV.VOLUME] = rows["volume"].astype(np.float64)
    return build_market(
        str(path), _times(path, rows, "ts_event", "record"), ohlcv,
        names=("open", "high", "low", "close", "volume"), time_column="ts_event",
        label=plain_row_label("record"), instrument=instrument, notes=(f"DBN {schema} bars", *_other_records(other)),
        layout=f"Databento DBN, schema {schema}", time_note=_TIME_NOTE.format("ts_event"),
    )


def _buckets(path: Path, rows: np.ndarray, bar_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Bucket start times and the first record index of each bucket (records must be in ts_recv order)."""
    stamps = _times(path, rows, "ts_recv", "record")
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


def _trades(
    path: Path, rows: np.ndarray, bar_ns: int, bar: str, instrument: InstrumentSpec | str | None, other: int
) -> MarketData:
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
        notes=(f"DBN trades aggregated to {bar} bars from {rows.size} trades", *_other_records(other)),
        flow=_flow(rows, np.ones(rows.size, dtype=bool), starts),
        layout="Databento DBN, schema trades", time_note=_TIME_NOTE.format("ts_recv"),
    )


def _mbp10(
    path: Path, rows: np.ndarray, bar_ns: int, bar: str, instrument: InstrumentSpec | str | None, other: int
) -> MarketData:
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
    closing = rows[ends]  # each level at the bar's close (an empty level: price NaN, size 0)
    levels = np.empty((starts.size, BOOK_LEVELS, LEVEL.size()))
    for level in range(BOOK_LEVELS):
        levels[:, level, LEVEL.BID_PRICE] = _prices(closing, f"bid_px_{level:02d}")
        levels[:, level, LEVEL.ASK_PRICE] = _prices(closing, f"ask_px_{level:02d}")
        levels[:, level, LEVEL.BID_SIZE] = closing[f"bid_sz_{level:02d}"]
        levels[:, level, LEVEL.ASK_SIZE] = closing[f"ask_sz_{level:02d}"]
    notes = [f"DBN mbp-10 aggregated to {bar} mid-price bars from {rows.size} book events", *_other_records(other)]
    if skipped:
        notes.append(f"{skipped} MBP-10 record(s) with an empty side of the book were not used for prices")
    return build_market(
        str(path), times, ohlcv, names=("mid", "mid", "mid", "mid", "size"), time_column="ts_recv",
        label=plain_row_label("bar"), instrument=instrument, notes=notes,
        book=book, flow=_flow(rows, is_trade, starts), levels=levels,
        layout="Databento DBN, schema mbp-10", time_note=_TIME_NOTE.format("ts_recv"),
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
