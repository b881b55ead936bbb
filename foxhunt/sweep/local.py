"""The ``local`` executor: trials as child processes of this machine, a fixed number at a time.

Each trial is its own process (:func:`foxhunt.sweep.trial.trial_command`), not a
task in a shared worker pool: a trial killed by the OOM killer or ``kill -9``
takes nothing else down (a ``ProcessPoolExecutor`` would mark the whole pool
broken), and its exit status says exactly what happened. Threads only wait on
the processes; ``on_done`` is called on the caller's thread, one trial at a time.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from foxhunt.sweep.outcome import TrialOutcome, process_outcome

__all__ = ["trial_command", "trial_environment", "TrialJob", "OnDone", "available_cores", "default_workers", "log_path", "LocalExecutor"]

LOG_DIR = "logs"


def trial_command(sweep_dir: Path, name: str, threads: int, python: str | None = None) -> list[str]:
    """The argv that trains trial ``name`` of the sweep in ``sweep_dir`` with ``threads`` CPU threads."""
    return [python or sys.executable, "-m", "foxhunt.sweep.trial", str(Path(sweep_dir).absolute()), name,
            "--threads", str(threads)]


def trial_environment(threads: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a trial process: its thread pools sized to ``threads`` before anything starts them.

    Without this every trial's OpenMP, MKL and numba pools would use every core, and trials running side by
    side would spin against each other. numba's workqueue pool, as ``foxhunt`` itself picks it.
    """
    env = dict(os.environ if base is None else base)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env[name] = str(threads)
    env.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    return env


@attrs.frozen
class TrialJob:
    """One trial to run: the sweep directory it belongs to, its name, its CPU threads and whether it takes a GPU."""

    sweep_dir: Path
    name: str
    threads: int
    gpu: bool = False


OnDone = Callable[[TrialJob, TrialOutcome], None]


def available_cores() -> int:
    """The cores this process may run on (a container's or taskset's limit, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_workers(threads: int) -> int:
    """Trials at a time on this machine: its cores divided by each trial's threads (at least one)."""
    return max(1, available_cores() // max(1, threads))


def log_path(sweep_dir: Path, name: str) -> Path:
    return Path(sweep_dir) / LOG_DIR / f"{name}.log"


def run_process(job: TrialJob, env: dict[str, str] | None = None) -> TrialOutcome:
    """Run one trial process to its end, its output into ``logs/NAME.log``; its outcome."""
    log = log_path(job.sweep_dir, job.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log, "wb") as output:
        returncode = subprocess.call(trial_command(job.sweep_dir, job.name, job.threads), stdout=output,
                                     stderr=subprocess.STDOUT, env=trial_environment(job.threads, env))
    return process_outcome(returncode, Path(job.sweep_dir) / job.name, log, time.perf_counter() - started,
                           socket.gethostname())


def _on_gpu(job: TrialJob, gpus: queue.Queue[int]) -> TrialOutcome:
    """Run ``job`` on one GPU of this machine, alone on it (``CUDA_VISIBLE_DEVICES``), then free the GPU."""
    gpu = gpus.get()
    try:
        return run_process(job, {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)})
    finally:
        gpus.put(gpu)


@attrs.frozen
class LocalExecutor:
    """``workers`` trial processes at a time (default: :func:`default_workers` of the jobs' threads); trials on
    CUDA take one of the machine's ``gpus`` each, so at most that many run at once."""

    workers: int | None = None
    gpus: int = 0

    def run(self, jobs: Sequence[TrialJob], on_done: OnDone) -> None:
        if not jobs:
            return
        workers = self.workers or default_workers(jobs[0].threads)
        free: queue.Queue[int] = queue.Queue()
        for gpu in range(self.gpus):
            free.put(gpu)
        if jobs[0].gpu:
            workers = min(workers, max(1, self.gpus))

        def start(job: TrialJob) -> TrialOutcome:
            return _on_gpu(job, free) if job.gpu and self.gpus else run_process(job)

        with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trial") as pool:
            futures = {pool.submit(start, job): job for job in jobs}
            for future in concurrent.futures.as_completed(futures):
                job = futures[future]
                try:
                    outcome = future.result()
                except OSError as error:  # the process could not start (no such interpreter, no memory to fork)
                    outcome = TrialOutcome("failed", f"the trial process could not start: {error}")
                on_done(job, outcome)
