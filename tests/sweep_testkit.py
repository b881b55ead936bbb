"""Shared pieces of the sweep tests: the tiny sweep config and a way to kill a trial mid-run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from trainer_testkit import TINY, TINY_DATA

# The trainer tests' tiny run with three folds of one epoch each: warm-up + 300 + 5 + 80 + 5 + 3 x 80 < 800 bars.
SWEEP_TINY = (*TINY, "train.epochs=1", "folds.n_folds=3", f'data.source="{TINY_DATA}"', 'run.device="cpu"')


def kill_when_started(run_dir: Path, killed: dict, timeout: float = 900.0) -> None:
    """SIGKILL the trial process of ``run_dir`` once it is running (its record names its pid).

    The wait is long because a busy machine can queue the trial behind the others for minutes; every trial of
    the sweep starts sooner or later, so the deadline only bounds a broken executor."""
    record = run_dir / "sweep_trial.json"
    deadline = time.monotonic() + timeout
    while not record.is_file():
        if time.monotonic() > deadline:
            return
        time.sleep(0.002)
    pid = json.loads(record.read_text(encoding="utf-8"))["pid"]
    os.kill(pid, signal.SIGKILL)
    killed["pid"] = pid
    killed["finished_before_kill"] = (run_dir / "summary.json").exists()
