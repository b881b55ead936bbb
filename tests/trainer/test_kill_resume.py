"""SIGKILL at any moment, then ``foxhunt train --resume``: at most one epoch is lost, and the result is the
uninterrupted run's, byte for byte (on the CPU).

A real ``foxhunt train`` process is killed with SIGKILL — no handler runs, as
after a power cut or the out-of-memory killer — at a moment hypothesis chooses:
a few milliseconds after the process wrote its config.toml (the build: data,
plugins, network, kernels loading) or after the N-th epoch's metric line
appeared (that epoch's resume checkpoint is being written, then the next epoch
runs), and at fixed moments besides. The run is then continued in-process with
``--resume`` and must end with the reference run's summary.json, metric lines
and fold checkpoints.

Cost: the session's in-process reference run compiles the kernels into the
private kernel cache first, so each child process loads them from disk (about
7 s from start to finish on 2 cores, most of it start-up and the report).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from trainer_testkit import foxhunt_process, invoke, train_args

from foxhunt.trainer.run_lock import LOCK_FILE

EPOCHS = 2 * 2  # folds x epochs of the TINY config
START_TIMEOUT_S = 300.0
FINISH_TIMEOUT_S = 120.0

# When to kill: (N, milliseconds after the N-th metric line appeared); N = 0: after config.toml appeared;
# N = -1: after the process started (the fixed examples only)
MOMENTS = st.tuples(st.integers(0, EPOCHS - 1), st.integers(0, 400))
STARTED, CONFIG_WRITTEN = -1, 0


def whole_metric_lines(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def reached(run_dir: Path, lines: int) -> bool:
    if lines == STARTED:
        return True
    if lines == CONFIG_WRITTEN:
        return (run_dir / "config.toml").exists()
    return whole_metric_lines(run_dir) >= lines


def kill_at(run_dir: Path, logs: Path, lines: int, delay_ms: int) -> int | None:
    """Start ``foxhunt train`` into ``run_dir`` and SIGKILL it at the moment; returns its exit code if it had
    already finished by then, else None."""
    process = foxhunt_process(train_args(run_dir), logs, dict(os.environ))
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not reached(run_dir, lines) and process.poll() is None:
            assert time.monotonic() < deadline, f"moment {lines} not reached after {START_TIMEOUT_S:.0f} s"
            time.sleep(0.005)
        time.sleep(delay_ms / 1000)
        finished = process.poll()
        process.kill()
    finally:
        process.wait(timeout=FINISH_TIMEOUT_S)
    return finished


def events(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def metric_positions(run_dir: Path) -> list[tuple[int, int]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return [(row["fold"], row["epoch"]) for row in rows]


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(moment=MOMENTS)
@example(moment=(STARTED, 0))  # before the run folder exists
@example(moment=(1, 0))  # the first epoch's resume checkpoint is being written
@example(moment=(2, 0))  # fold 0's last checkpoint and test; then fold 1 starts
def test_sigkill_then_resume_loses_at_most_one_epoch_and_ends_like_the_uninterrupted_run(
    reference_run: Path, tmp_path_factory: pytest.TempPathFactory, moment: tuple[int, int]
) -> None:
    root = tmp_path_factory.mktemp("killed")
    run_dir = root / "run"
    finished = kill_at(run_dir, root / "logs", *moment)
    committed = whole_metric_lines(run_dir)

    if finished is not None:  # it ended before the kill: finished runs are never resumed
        event("finished before the kill")
        assert finished == 0, (root / "logs" / "stderr.txt").read_text(encoding="utf-8")[-4000:]
        result = invoke("train", "--resume", str(run_dir), "--no-progress")
        assert result.exit_code == 2 and "the run finished" in result.stderr
    elif (run_dir / "summary.json").exists():  # killed while writing the report: finished all the same
        event("killed after summary.json")
        result = invoke("train", "--resume", str(run_dir), "--no-progress")
        assert result.exit_code == 2 and "the run finished" in result.stderr
        assert invoke("report", str(run_dir)).exit_code == 0
    elif not (run_dir / "config.toml").exists():  # killed before it wrote anything to resume from
        event("killed before config.toml")
        assert committed == 0
        result = invoke(*train_args(run_dir))  # the same command again, into the same folder
        assert result.exit_code == 0, result.output + result.stderr
    else:
        result = invoke("train", "--resume", str(run_dir), "--no-progress")
        assert result.exit_code == 0, result.output + result.stderr
        logged = events(result.stderr)
        resumed = [e["metric_lines"] for e in logged if e["event"] == "resumed"]
        started_over = [e for e in logged if e["event"].startswith("no resume checkpoint")]
        kept = resumed[0] if resumed else 0
        event(f"resumed after {kept} of {committed} metric lines" if resumed else "resumed from the start")
        assert resumed or started_over
        assert kept >= committed - 1, f"{committed} epochs were written, the resume kept {kept}: more than one lost"

    assert (run_dir / "summary.json").read_bytes() == (reference_run / "summary.json").read_bytes()
    assert metric_positions(run_dir) == metric_positions(reference_run)
    for fold in (0, 1):
        name = f"checkpoints/fold_{fold}/tensors.safetensors"
        assert (run_dir / name).read_bytes() == (reference_run / name).read_bytes()
    assert (run_dir / "report.html").exists()
    assert not (run_dir / LOCK_FILE).exists()
