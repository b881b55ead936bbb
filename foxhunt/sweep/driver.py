"""Start a sweep, run its pending trials on an executor, and keep ``sweep.json`` current.

:func:`start_sweep` writes the plan into a new (or empty) sweep directory;
:func:`run_pending` runs every trial that is not complete — all of them the
first time, the failed and missing ones on a retry — holding the sweep's lock so
that two drivers never run one sweep, and rewrites ``sweep.json`` and
``sweep.html`` after each trial. A failed trial's folder is deleted before it
runs again: a trial always starts from scratch with its own seed, so its result
does not depend on how often it was tried.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from foxhunt import durable
from foxhunt.errors import FoxhuntError
from foxhunt.profiles import device_name
from foxhunt.sweep.local import TrialJob
from foxhunt.sweep.outcome import COMPLETE, TrialOutcome
from foxhunt.sweep.plan import PLAN_FILE, SweepPlan, make_plan, read_plan, write_plan
from foxhunt.sweep.results import read_outcomes, write_results
from foxhunt.sweep.spec import SweepSpec
from foxhunt.trainer.run_lock import RunLock

__all__ = ["Executor", "start_sweep", "pending_trials", "run_pending"]


class Executor(Protocol):
    def run(self, jobs: list[TrialJob], on_done: Callable[[TrialJob, TrialOutcome], None]) -> None: ...


def start_sweep(directory: Path, base_config: str, spec: SweepSpec, *, reports: bool = True) -> SweepPlan:
    """Write the plan of a new sweep into ``directory`` (new or empty); a sweep already there is refused."""
    directory = Path(directory)
    if (directory / PLAN_FILE).exists():
        raise FoxhuntError(f"{directory} already holds a sweep; continue it with `foxhunt sweep --retry {directory}`, "
                           "or choose another --out")
    if directory.exists() and any(directory.iterdir()):
        raise FoxhuntError(f"{directory} is not empty and holds no sweep; choose a new or empty folder with --out")
    directory.mkdir(parents=True, exist_ok=True)
    plan = make_plan(base_config, spec, reports=reports)
    durable.write_text(directory / "base.toml", base_config)
    write_plan(directory, plan)
    return plan


def pending_trials(directory: Path, plan: SweepPlan, outcomes: dict[str, TrialOutcome]) -> list[str]:
    """The trials to run: not recorded complete, or recorded complete but without their ``summary.json``."""
    return [trial.name for trial in plan.trials
            if outcomes.get(trial.name, TrialOutcome("missing")).state != COMPLETE
            or not (Path(directory) / trial.name / "summary.json").is_file()]


def _discard(run_dir: Path) -> None:
    """Delete a failed or interrupted trial's folder, so it starts again from scratch — unless a process still
    trains it (a trial left running by a driver that was killed): its run lock names that process."""
    lock = RunLock(run_dir)
    lock.acquire()  # RunLocked, one paragraph naming the process, while that trial still runs
    lock.release()
    shutil.rmtree(run_dir)


def run_pending(directory: Path, executor: Executor, *, threads: int = 1,
                on_trial: Callable[[str, TrialOutcome], None] | None = None) -> dict[str, Any]:
    """Run the sweep's pending trials on ``executor``; returns the final ``sweep.json`` data."""
    directory = Path(directory).absolute()
    plan = read_plan(directory)
    lock = RunLock(directory)
    lock.acquire()  # a second driver on this sweep is refused, naming the process that runs it
    try:
        outcomes = read_outcomes(directory)
        names = pending_trials(directory, plan, outcomes)
        for name in names:
            outcomes.pop(name, None)
            if (directory / name).exists():
                _discard(directory / name)
        write_results(directory, plan, outcomes)
        # `auto` is decided by the driver's machine: give --device cuda to get one GPU per trial on a cluster
        gpu = device_name(plan.device) == "cuda"
        jobs = [TrialJob(directory, name, threads, gpu) for name in names]

        def done(job: TrialJob, outcome: TrialOutcome) -> None:
            outcomes[job.name] = outcome
            write_results(directory, plan, outcomes)  # after every trial: a killed driver loses no result
            if on_trial is not None:
                on_trial(job.name, outcome)

        executor.run(jobs, done)
        return write_results(directory, plan, outcomes)
    finally:
        lock.release()
