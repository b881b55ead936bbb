"""metrics.jsonl: one write per line, and a resume repairs a torn last line and cuts back to the checkpoint's count."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from foxhunt import durable
from foxhunt.errors import FoxhuntError
from foxhunt.trainer.metrics_log import MetricsLog

ROWS = [{"fold": 0, "epoch": epoch, "loss": 0.5 / (epoch + 1), "odd": math.nan if epoch == 2 else 1.0} for epoch in range(5)]


def written(path: Path, rows: list[dict]) -> MetricsLog:
    log = MetricsLog(path)
    for row in rows:
        log.append(row)
    log.sync()
    return log


def test_each_line_is_one_write_of_one_json_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    real = durable.write_all
    monkeypatch.setattr(durable, "write_all", lambda handle, data: (writes.append(bytes(data)), real(handle, data)))
    log = written(tmp_path / "metrics.jsonl", ROWS)
    assert len(writes) == len(ROWS) and all(w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes)
    assert (tmp_path / "metrics.jsonl").read_bytes() == b"".join(writes)
    assert log.lines() == len(ROWS)
    assert MetricsLog(tmp_path / "metrics.jsonl").lines() == len(ROWS)  # counted afresh from the file


@pytest.mark.parametrize(
    "tail",
    [b'{"fold": 0, "epoch": 5, "lo', b"\x00" * 37 + b"\n", b"{not json}\n"],
    ids=["cut-mid-line", "zeros-after-a-power-cut", "not-json"],
)
def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "metrics.jsonl"
    written(path, ROWS).close()
    whole = path.read_bytes()
    path.write_bytes(whole + tail)
    log = MetricsLog(path)
    with capture_logs() as logs:
        log.restore(len(ROWS))
    assert path.read_bytes() == whole
    assert [entry["event"] for entry in logs] == ["metrics.jsonl: dropped a torn last line (the process stopped while writing it)"]
    log.append(ROWS[0])
    assert log.lines() == len(ROWS) + 1


def test_lines_past_the_checkpoint_are_cut_and_too_few_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    written(path, ROWS).close()
    MetricsLog(path).restore(3)
    assert [json.loads(line)["epoch"] for line in path.read_text(encoding="utf-8").splitlines()] == [0, 1, 2]
    with pytest.raises(FoxhuntError, match=r"holds 3 whole lines, but the resume checkpoint counted 4"):
        MetricsLog(path).restore(4)
    MetricsLog(tmp_path / "none.jsonl").restore(0)  # a run killed before its first line: nothing to do
    assert not (tmp_path / "none.jsonl").exists()


@settings(max_examples=50, deadline=None)
@given(cut=st.integers(0, 10**6), keep=st.integers(0, len(ROWS)))
def test_a_file_cut_at_any_byte_restores_to_the_committed_lines(tmp_path_factory, cut: int, keep: int) -> None:
    """A kill mid-append leaves a prefix of the file; whatever the prefix, the committed lines come back intact."""
    path = tmp_path_factory.mktemp("metrics") / "metrics.jsonl"
    written(path, ROWS).close()
    whole = path.read_bytes()
    prefix = whole[: cut % (len(whole) + 1)]
    path.write_bytes(prefix)
    lines = whole.splitlines(keepends=True)
    committed = sum(1 for end in range(1, len(lines) + 1) if len(b"".join(lines[:end])) <= len(prefix))
    if keep > committed:
        with pytest.raises(FoxhuntError):
            MetricsLog(path).restore(keep)
        return
    MetricsLog(path).restore(keep)
    assert path.read_bytes() == b"".join(lines[:keep])
