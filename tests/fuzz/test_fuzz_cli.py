"""``foxhunt train --data FILE`` on fuzzed files: exit code 2, one error paragraph, no traceback, no run folder.

The in-process examples draw any file of the suite (CSV, Parquet, DBN; tabular_files.py and dbn_files.py)
and run the click command group itself; none has the 4,064 bars the default folds need, so even a file
that loads ends in the fold error, which is one paragraph too. A few files that once gave tracebacks
then run through the real program in child processes, where stderr is what a user sees.
"""

from __future__ import annotations

import io
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import databento_dbn as db
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import structlog
from click.testing import CliRunner
from dbn_files import SCALE, compress, dbn_files, metadata
from fuzz_inputs import SECONDS_PER_LOAD, time_limit
from hypothesis import given
from hypothesis import strategies as st
from tabular_files import csv_files, parquet_files

from foxhunt.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
_counter = itertools.count()
# "Exception ignored in ..." is a traceback on stderr too (a library callback that failed): an error here.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private feature cache (never the user's), and structlog put back after the CLI configured it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path_factory.mktemp("feature-cache")))
        yield tmp_path_factory.mktemp("fuzz-cli")
    structlog.reset_defaults()


def assert_one_error_paragraph(stderr: str, path: Path) -> None:
    """Log lines may come first (gaps found while loading); the error is the last paragraph, and the only one."""
    assert "Traceback" not in stderr and "panicked" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    paragraph = stderr[stderr.index("error: ") :]
    assert paragraph.rstrip("\n").count("\n\n") == 0, stderr
    if "fold(s) need at least" not in paragraph:  # the fold error is about the config's sizes, not the file
        assert str(path) in paragraph, stderr


any_file = st.one_of(
    csv_files().map(lambda case: case[:2]),
    parquet_files().map(lambda data: (data, ".parquet")),
    dbn_files(),
)


@given(any_file)
def test_foxhunt_train_on_a_fuzzed_file_exits_2_with_one_paragraph(scratch: Path, case: tuple[bytes, str]) -> None:
    data, suffix = case
    number = next(_counter)
    path = scratch / f"data_{number}{suffix}"
    path.write_bytes(data)
    out = scratch / f"run_{number}"
    with time_limit(SECONDS_PER_LOAD):
        result = CliRunner().invoke(cli, ["train", "--data", str(path), "--out", str(out), "--no-progress"], prog_name="foxhunt")
    assert result.exit_code == 2, (result.exception, result.output)
    assert_one_error_paragraph(result.stderr, path)
    assert not out.exists(), "a failed run left its folder behind"


def _short_dbn_record() -> bytes:
    """An OHLCV file whose last record says it is 48 bytes long: databento-dbn's decoder panicked on it."""
    bar = db.OHLCVMsg(db.RType.OHLCV_1M, 1, 42, 1_704_187_800 * SCALE, 4700 * SCALE, 4701 * SCALE, 4699 * SCALE, 4700 * SCALE, 5)
    short = bytearray(bytes(bar))
    short[0] = 12
    return metadata(db.Schema.OHLCV_1M, 1_704_187_800 * SCALE) + bytes(bar) + bytes(short[:48])


def _truncated_parquet() -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"time": ["2021-01-04", "2021-01-05"], "open": [1.0, 1.1], "high": [1.2, 1.2],
                             "low": [0.9, 1.0], "close": [1.1, 1.1], "volume": [5, 6]}), buffer)  # fmt: skip
    return buffer.getvalue()[: len(buffer.getvalue()) // 2]


# Files that gave tracebacks before the fuzzing suite existed (docs/reliability.md lists them).
ONCE_TRACEBACKS = {
    "random bytes in a .dbn.zst": (".dbn.zst", compress(metadata(db.Schema.TRADES, 0), "finished")[:9] + bytes(range(256))),
    "a DBN record shorter than its type": (".dbn", _short_dbn_record()),
    "a CSV with a byte-order mark and a price of 1e308": (
        ".csv", "\ufeffTime,Open,High,Low,Close,Volume\n2021-01-04 00:00:00,1e308,1e308,1e308,1e308,1\n".encode()),
    "epoch digits beyond int64": (".csv", b"time,open,high,low,close,volume\n9999999999999999999,1,2,0.5,1.5,1\n"),
    "a truncated Parquet file": (".parquet", _truncated_parquet()),
}


@pytest.mark.parametrize("name", list(ONCE_TRACEBACKS))
def test_files_that_once_gave_a_traceback_exit_2_with_one_paragraph(scratch: Path, name: str) -> None:
    suffix, data = ONCE_TRACEBACKS[name]
    path = scratch / f"once_{next(_counter)}{suffix}"
    path.write_bytes(data)
    result = CliRunner().invoke(cli, ["train", "--data", str(path), "--no-progress"], prog_name="foxhunt")
    assert result.exit_code == 2, (result.exception, result.output)
    assert_one_error_paragraph(result.stderr, path)


# What the real program prints: three of the files above, each in its own process (seconds each, mostly torch's import).
IN_CHILD_PROCESSES = ("random bytes in a .dbn.zst", "a DBN record shorter than its type", "a CSV with a byte-order mark and a price of 1e308")


def test_the_real_program_exits_2_without_a_traceback_on_files_that_once_gave_one(tmp_path: Path) -> None:
    env = {**os.environ, "FOXHUNT_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    children = {}
    for number, name in enumerate(IN_CHILD_PROCESSES):
        suffix, data = ONCE_TRACEBACKS[name]
        path = tmp_path / f"file_{number}{suffix}"
        path.write_bytes(data)
        command = [sys.executable, "-m", "foxhunt.cli.main", "train", "--data", str(path), "--out", str(tmp_path / f"run_{number}"),
                   "--no-progress"]  # fmt: skip
        # all at once: each child spends its seconds importing torch, and two cores share them
        children[name] = (path, subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for name, (path, child) in children.items():
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 2, (name, stderr)
        assert_one_error_paragraph(stderr, path)
    assert not list(tmp_path.glob("run_*")), "a failed run left its folder behind"
