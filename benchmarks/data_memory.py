"""Peak memory of loading a large OHLCV file, against the size of the arrays it becomes.

Usage: ``python benchmarks/data_memory.py [--rows 1000000 4500000] [--formats csv parquet dbn] [--json]``

For each row count, writes a minute-bar OHLCV file (a random walk, five decimals,
``2010-01-04 00:00:00`` timestamps: about 55 bytes a row of CSV; DBN ohlcv-1m
records of 56 bytes) into a temporary
directory, deleted afterwards. Each file is loaded by a fresh child process
(``--measure FILE``) which first imports foxhunt and loads a tiny file (so that lazy
imports and allocator set-up are not counted), then resets the kernel's peak-RSS
counter (``/proc/self/clear_refs``), loads the file and reads the peak back
(``VmHWM``). Prints one row per file: file size, bars, the final arrays
(``timestamps`` + ``ohlcv``), the peak above the process's resident size before the
load, their ratio and the load's wall seconds. docs/data.md, "Memory", records the
numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.parquet as pq

__all__ = ["write_bars", "measure", "main"]

_SCHEMA = pa.schema([("time", pa.string()), ("open", pa.float64()), ("high", pa.float64()), ("low", pa.float64()),
                     ("close", pa.float64()), ("volume", pa.int64())])


def _batches(rows: int, seed: int, chunk: int = 1_000_000):
    """Minute bars of a random walk, ``chunk`` rows at a time (the writer never holds the whole file)."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2010-01-04T00:00", "s")
    price = 1.1
    for first in range(0, rows, chunk):
        n = min(chunk, rows - first)
        close = price * np.exp(np.cumsum(rng.normal(0.0, 3e-4, n)))
        open_ = np.r_[price, close[:-1]]
        price = float(close[-1])
        high = np.maximum(open_, close) * (1 + np.abs(rng.normal(0.0, 1e-4, n)))
        low = np.minimum(open_, close) * (1 - np.abs(rng.normal(0.0, 1e-4, n)))
        times = pa.array(start + np.arange(first, first + n) * np.timedelta64(60, "s"), pa.timestamp("s"))
        yield pa.table({
            "time": pc.strftime(times, format="%Y-%m-%d %H:%M:%S"),
            # rounding is monotonic, so low <= open, close <= high still holds at five decimals
            "open": np.round(open_, 5), "high": np.round(high, 5), "low": np.round(low, 5), "close": np.round(close, 5),
            "volume": rng.integers(0, 1000, n),
        }, schema=_SCHEMA)


def _write_dbn(path: Path, rows: int, seed: int) -> Path:
    """An ohlcv-1m DBN file: records laid out with databento-dbn's own record dtype, prices in units of 1e-9."""
    import databento_dbn as db  # the optional extra, only for this format

    dtype = np.dtype(db.OHLCVMsg._dtypes)
    start = 1_262_563_200 * 10**9  # 2010-01-04
    with open(path, "wb") as handle:
        handle.write(bytes(db.Metadata(dataset="GLBX.MDP3", start=start, stype_in=db.SType.RAW_SYMBOL,
                                       stype_out=db.SType.INSTRUMENT_ID, schema=db.Schema.OHLCV_1M, symbols=["ESH4"])))
        first = 0
        for batch in _batches(rows, seed):
            records = np.zeros(batch.num_rows, dtype)
            records["length"], records["rtype"] = dtype.itemsize // 4, int(db.RType.OHLCV_1M)
            records["publisher_id"], records["instrument_id"] = 1, 42
            records["ts_event"] = start + (first + np.arange(batch.num_rows, dtype=np.uint64)) * 60 * 10**9
            for name in ("open", "high", "low", "close"):
                records[name] = np.round(batch[name].to_numpy() * 1e9).astype(np.int64)
            records["volume"] = batch["volume"].to_numpy()
            handle.write(records.tobytes())
            first += batch.num_rows
    return path


def write_bars(path: Path, rows: int, seed: int = 0) -> Path:
    """An OHLCV file of ``rows`` minute bars; CSV, Parquet or DBN by the suffix."""
    path = Path(path)
    if path.suffix == ".dbn":
        return _write_dbn(path, rows, seed)
    if path.suffix == ".parquet":
        with pq.ParquetWriter(path, _SCHEMA) as writer:
            for batch in _batches(rows, seed):
                writer.write_table(batch)
        return path
    with open(path, "wb") as handle:
        handle.write(b"time,open,high,low,close,volume\n")
        options = pv.WriteOptions(include_header=False, quoting_style="none")
        for batch in _batches(rows, seed):
            pv.write_csv(batch, handle, write_options=options)
    return path


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure(path: Path) -> dict[str, float]:
    """Load ``path`` in this process and return its peak memory; meant for a fresh child process."""
    from foxhunt.data import load

    with tempfile.TemporaryDirectory() as scratch:  # warm-up: lazy imports and allocator arenas are not the file's
        load(str(write_bars(Path(scratch) / ("warm.parquet" if path.suffix == ".parquet" else "warm.csv"), 100)))
    before_kib = _status_kib("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
        method = "VmHWM after clear_refs"
    except OSError:
        # Without clear_refs, the peak so far is the baseline: an overestimate only if the warm-up peaked higher.
        before_kib = max(before_kib, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        method = "ru_maxrss"
    start = time.perf_counter()
    market = load(str(path))
    seconds = time.perf_counter() - start
    peak_kib = _status_kib("VmHWM") if method.startswith("VmHWM") else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    arrays = market.timestamps.nbytes + market.ohlcv.nbytes
    return {
        "file_mib": path.stat().st_size / 2**20,
        "bars": len(market),
        "arrays_mib": arrays / 2**20,
        "peak_mib": (peak_kib - before_kib) / 1024,
        "ratio": (peak_kib - before_kib) * 1024 / arrays,
        "seconds": seconds,
        "method": method,
    }


def measure_in_child(path: Path) -> dict[str, float]:
    result = subprocess.run([sys.executable, __file__, "--measure", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"measuring {path} failed:\n{result.stdout}{result.stderr}")
    return json.loads(result.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 4_500_000])
    parser.add_argument("--formats", nargs="+", choices=("csv", "parquet", "dbn"), default=["csv", "parquet", "dbn"])
    parser.add_argument("--json", action="store_true", help="one JSON object per file instead of the table")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure(args.measure)))
        return
    if not args.json:
        print(f"{'file':<8} {'file MiB':>9} {'bars':>10} {'arrays MiB':>11} {'peak MiB':>9} {'peak/arrays':>12} {'seconds':>8}")
    with tempfile.TemporaryDirectory(prefix="foxhunt-memory-") as scratch:
        for rows in args.rows:
            for kind in args.formats:
                path = write_bars(Path(scratch) / f"bars_{rows}.{kind}", rows)
                row = measure_in_child(path)
                os.unlink(path)
                if args.json:
                    print(json.dumps({"format": kind, **row}))
                else:
                    print(f"{kind:<8} {row['file_mib']:>9.0f} {row['bars']:>10,} {row['arrays_mib']:>11.0f} "
                          f"{row['peak_mib']:>9.0f} {row['ratio']:>12.2f} {row['seconds']:>8.1f}")


if __name__ == "__main__":
    main()
