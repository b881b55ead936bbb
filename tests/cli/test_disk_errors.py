"""A disk that refuses a write mid-run (full, read-only) is one paragraph, not a traceback (issue 14)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from trainer_testkit import invoke, train_args

from foxhunt.trainer.metrics_log import MetricsLog


@pytest.mark.parametrize(("code", "reason"), [(errno.EROFS, "Read-only file system"), (errno.ENOSPC, "No space left on device")])
def test_a_disk_refusing_the_second_epochs_metrics_is_one_paragraph(tmp_path: Path, monkeypatch, code: int,
                                                                    reason: str) -> None:
    real_append = MetricsLog.append
    calls = []

    def append(self: MetricsLog, row: dict) -> None:
        calls.append(row)
        if len(calls) == 2:  # the second epoch's line: the first epoch's checkpoint is on the disk
            raise OSError(code, reason, str(self.path))
        real_append(self, row)

    monkeypatch.setattr(MetricsLog, "append", append)
    out = tmp_path / "run"
    result = invoke(*train_args(out))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"the disk refused a file operation ({out / 'metrics.jsonl'}): {reason}" in result.stderr
    assert "foxhunt train --resume" in result.stderr
    position = json.loads((out / "checkpoints" / "resume" / "metadata.json").read_text())["position"]
    assert (position["fold"], position["epoch"]) == (0, 1)


def test_any_other_os_error_is_still_a_traceback_to_report(tmp_path: Path, monkeypatch) -> None:
    def append(self: MetricsLog, row: dict) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(MetricsLog, "append", append)
    result = invoke(*train_args(tmp_path / "run"))
    assert result.exit_code == 1 and isinstance(result.exception, OSError)
