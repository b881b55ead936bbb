"""A sweep of 4 seeds x 3 folds on a real local Ray cluster, one trial killed mid-run, then retried.

The executor starts its own local cluster (two CPUs: two trials at a time) and shuts it down; each trial is
a Ray task trained in its Ray worker process. The test kills one trial's worker with SIGKILL as soon as the
trial has claimed its run directory (the worker's pid is in ``sweep_trial.json``): the sweep must still
finish every other trial, record the kill, and a retry must run that trial alone and complete the sweep. A tiny
trial can finish before the killer acts on a busy machine; the sweep is then run afresh, up to ATTEMPTS times.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from sweep_testkit import kill_when_started
from foxhunt.sweep.driver import run_pending, start_sweep
from foxhunt.sweep.ray_cluster import RayExecutor
from foxhunt.sweep.spec import SweepSpec

VICTIM = "seed1_fold1"
ATTEMPTS = 3


def test_a_trial_killed_on_ray_is_recorded_and_a_retry_completes_the_sweep(tmp_path: Path, base_config: str,
                                                                           warm_cache: Path) -> None:
    # A tiny trial in a warm worker can finish before a killer starved of CPU acts; then the sweep is run afresh
    # (every attempt must leave no trial missing), and the kill must land mid-trial within ATTEMPTS.
    for attempt in range(ATTEMPTS):
        directory = tmp_path / f"sweep{attempt}"
        plan = start_sweep(directory, base_config, SweepSpec(seeds=4), reports=False)
        assert len(plan.trials) == 12  # 4 seeds x 3 folds
        executor = RayExecutor(init_options={"num_cpus": 2, "include_dashboard": False})
        killed: dict = {}
        killer = threading.Thread(target=kill_when_started, args=(directory / VICTIM, killed))
        killer.start()
        data = run_pending(directory, executor)
        killer.join()
        assert killed.get("pid"), "the victim trial never started"
        if not killed["finished_before_kill"]:
            break
        assert data["counts"]["missing"] == 0
    assert not killed["finished_before_kill"], f"the victim finished before the kill in all {ATTEMPTS} attempts"
    assert data["counts"] == {"complete": 11, "failed": 1, "missing": 0}
    victim = next(t for t in data["trials"] if t["name"] == VICTIM)
    assert victim["state"] == "failed"
    assert victim["reason"].startswith("Ray: WorkerCrashedError: "), victim["reason"]
    assert json.loads((directory / "sweep.json").read_text()) == data  # what the driver wrote last
    assert data["variants"][0]["metrics"]["sharpe"]["agent"]["n"] == 11
    finished = {t["name"]: (directory / t["name"] / "summary.json").stat().st_mtime_ns
                for t in data["trials"] if t["state"] == "complete"}

    data = run_pending(directory, RayExecutor(init_options={"num_cpus": 2, "include_dashboard": False}))
    assert data["counts"] == {"complete": 12, "failed": 0, "missing": 0}
    assert (directory / VICTIM / "summary.json").is_file()
    assert {name: (directory / name / "summary.json").stat().st_mtime_ns for name in finished} == finished
    assert data["variants"][0]["metrics"]["sharpe"]["agent"]["n"] == 12
