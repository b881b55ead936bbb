"""``foxhunt tune --workers N``: N workers run one study side by side, as processes here or as Ray tasks.

Every worker runs :func:`foxhunt.tune.worker.run_worker` on the same study and storage. The session's
``--trials`` budget is split between them up front (:func:`shares`): worker k runs its fixed share, so the
session adds exactly ``--trials`` trials. A shared counter (Optuna's ``MaxTrialsCallback`` on the study's
trial count) would instead let workers that check it at the same moment each start one more trial, and it
counts the study's earlier sessions too; a fixed share costs only a little balance (a worker whose trials are
pruned early finishes first and idles).

- :func:`run_local`: each worker a child process (``python -m foxhunt.tune.worker``), its thread pools sized
  as a sweep trial's (:func:`foxhunt.sweep.local.trial_environment`), its output on this terminal; on CUDA
  worker k sees GPU k modulo the GPU count.
- :func:`run_ray`: each worker a Ray task asking for its threads as CPUs (and ``num_gpus=1`` on CUDA), on a
  local cluster sized to the workers or an existing one (:func:`foxhunt.sweep.ray_cluster.ray_session`).
  A worker must reach the storage: with the default SQLite storage, the study directory must be on a
  filesystem every node mounts at the same path (docs/tune.md).

Both return what went wrong, one line per worker that did not finish its share; the trials themselves are in
the study.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from foxhunt.sweep.local import trial_environment
from foxhunt.tune.worker import WorkerJob, configure_worker_logging, run_worker

__all__ = ["shares", "worker_jobs", "run_local", "run_ray"]


def shares(trials: int, workers: int) -> list[int]:
    """``trials`` split over ``workers`` as evenly as can be (the first ones take one more); no empty share."""
    workers = min(workers, trials)
    return [trials // workers + (1 if k < trials % workers else 0) for k in range(workers)]


def worker_jobs(study: str, directory: Path, storage: str, *, trials: int, workers: int, threads: int = 1,
                timeout: float | None = None, seed: int = 0, device: str | None = None,
                log_level: str = "warning") -> list[WorkerJob]:
    """One job per worker, each with its share of ``trials``."""
    return [WorkerJob(study, Path(directory).absolute(), storage, share, k, threads, timeout, seed, device, log_level)
            for k, share in enumerate(shares(trials, workers))]


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        return f"killed by signal {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def run_local(jobs: Sequence[WorkerJob], gpus: int = 0) -> list[str]:
    """Run every job as a child process at once and wait for all; the workers that failed, and why."""
    processes = []
    for job in jobs:
        env = trial_environment(job.threads)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(job.index % gpus)
        processes.append((job, subprocess.Popen(job.command(), env=env)))
    problems = []
    for job, process in processes:
        returncode = process.wait()
        if returncode != 0:
            problems.append(f"worker {job.index} ({job.trials} trials): {_exit_reason(returncode)}")
    return problems


def _run_on_node(job: WorkerJob) -> str | None:
    """The body of a Ray task: the worker in this Ray worker process; None, or why it did not finish."""
    host = socket.gethostname()
    if not Path(job.directory).is_dir():
        return (f"the study directory {job.directory} is not visible on node {host}: put it on a filesystem every "
                "node mounts at the same path (docs/tune.md)")
    # numba's workqueue pool, as the foxhunt program picks it (foxhunt.cli.main), before the first trial starts numba
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    configure_worker_logging(job)  # the Ray worker process runs this task as its program
    returncode = run_worker(job)
    return None if returncode == 0 else f"{_exit_reason(returncode)} on node {host} (its output above says why)"


def run_ray(jobs: Sequence[WorkerJob], *, address: str | None = None, gpu: bool = False) -> list[str]:
    """Run every job as a Ray task; the workers that failed, and why.

    Without ``address`` a local cluster is started with exactly the CPUs the workers ask for, so they all
    run at once whatever the machine's size, and shut down at the end.
    """
    from foxhunt.sweep.ray_cluster import ray_session

    init: dict[str, Any] = {} if address else {"num_cpus": sum(job.threads for job in jobs)}
    with ray_session(address, init) as ray:
        task = ray.remote(max_retries=0)(_run_on_node)  # a failed worker is reported, never silently rerun
        refs = []
        for job in jobs:
            options: dict[str, Any] = {"num_cpus": job.threads, "name": f"foxhunt-tune-{job.study}-{job.index}"}
            if gpu:  # one GPU, and a fresh worker (max_calls=1): its CUDA context and memory go with it
                options.update(num_gpus=1, max_calls=1)
            refs.append((job, task.options(**options).remote(job)))
        problems = []
        for job, ref in refs:
            try:
                reason = ray.get(ref)
            except ray.exceptions.RayError as error:  # the worker or its node died
                reason = f"Ray: {type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
            if reason is not None:
                problems.append(f"worker {job.index} ({job.trials} trials): {reason}")
        return problems
