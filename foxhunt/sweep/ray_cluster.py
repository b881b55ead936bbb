"""The ``ray`` executor: trials as Ray tasks on a local cluster or an existing one (``--ray-address``).

Each task asks Ray for the trial's CPU threads and, for a CUDA config, one GPU
(``num_gpus=1``; Ray sets ``CUDA_VISIBLE_DEVICES`` to it) and trains the trial
inside the Ray worker process Ray chose (:func:`foxhunt.sweep.trial.run_trial`),
its output going to ``logs/NAME.log``. Ray already gives every task a worker
process of its own: a trial that crashes or is killed takes down that worker
only, and Ray reports it (``WorkerCrashedError``, ``OutOfMemoryError`` from its
memory monitor, ``NodeDiedError``), which is recorded as the trial's reason.
Running in the worker rather than in one more child process means a worker pays
the imports and kernel loading once for all the trials it runs; a GPU task gets
a fresh worker every time (``max_calls=1``), so GPU memory is returned after
each trial. Tasks are never retried by Ray: ``foxhunt sweep --retry`` decides
what runs again.

Every node writes its trials into the sweep directory by the driver's path, so
on several machines that directory must be on a filesystem every node mounts at
the same path (docs/sweep.md). Ray is imported only here, when a sweep runs on it.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from foxhunt.errors import FoxhuntError
from foxhunt.sweep.local import OnDone, TrialJob, log_path
from foxhunt.sweep.outcome import FAILED, TrialOutcome, process_outcome

__all__ = ["import_ray", "ray_session", "RayExecutor"]


def import_ray() -> Any:
    """ray, or one paragraph saying how to install it (it is the ``sweep`` extra)."""
    try:
        import ray
    except ImportError:
        raise FoxhuntError("--executor ray (foxhunt sweep, foxhunt tune) needs Ray, which is not installed: "
                           "pip install 'foxhunt[sweep]' (or pip install 'ray>=2.9') on this machine and on every "
                           "node of the cluster; --executor local needs nothing more") from None
    return ray


@contextmanager
def ray_session(address: str | None, init_options: dict[str, Any]) -> Iterator[Any]:
    """ray, connected for the block: to the cluster at ``address``, or to a local one started with
    ``init_options`` (e.g. ``num_cpus``) and shut down at the end. A process that already called ``ray.init``
    keeps its own cluster. Shared by ``foxhunt sweep`` and ``foxhunt tune --executor ray``."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        options = {"include_dashboard": False, **init_options}
        ray.init(address=address, **options) if address else ray.init(**options)
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


@contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to ``path`` for the block.

    A Ray worker's output is otherwise streamed to the driver's terminal; a trial's logs belong in its log file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "wb") as output:
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for handle in saved:
                os.close(handle)


def _run_on_node(job: TrialJob) -> TrialOutcome:
    """The body of a Ray task: the trial in this worker process, or why it cannot run on this node."""
    from foxhunt.sweep.trial import run_trial

    host = socket.gethostname()
    if not Path(job.sweep_dir).is_dir():
        return TrialOutcome(FAILED, f"the sweep directory {job.sweep_dir} is not visible on node {host}: put it on "
                                    "a filesystem every node mounts at the same path (docs/sweep.md)", host=host)
    # numba's workqueue pool, as the foxhunt program picks it (foxhunt.cli.main), before a first trial starts numba
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    log = log_path(job.sweep_dir, job.name)
    started = time.perf_counter()
    with _output_to(log):
        try:
            returncode = run_trial(job.sweep_dir, job.name, job.threads)
        except Exception:  # a bug: its traceback goes to the log, as a trial process's would
            traceback.print_exc()
            returncode = 1
    return process_outcome(returncode, Path(job.sweep_dir) / job.name, log, time.perf_counter() - started, host)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


@attrs.frozen
class RayExecutor:
    """Trials as Ray tasks. ``address`` joins an existing cluster; without it a local one is started with
    ``init_options`` (e.g. ``num_cpus``) and shut down at the end. A process that already called ``ray.init``
    keeps its own cluster."""

    address: str | None = None
    init_options: dict[str, Any] = attrs.Factory(dict)

    def run(self, jobs: Sequence[TrialJob], on_done: OnDone) -> None:
        if not jobs:
            return
        with ray_session(self.address, self.init_options) as ray:
            self._run(ray, jobs, on_done)

    def _run(self, ray: Any, jobs: Sequence[TrialJob], on_done: OnDone) -> None:
        task = ray.remote(max_retries=0)(_run_on_node)
        pending: dict[Any, tuple[TrialJob, float]] = {}
        for job in jobs:
            options: dict[str, Any] = {"num_cpus": job.threads, "name": f"foxhunt-trial-{job.name}"}
            if job.gpu:  # one GPU, and a fresh worker (max_calls=1): its CUDA context and memory go with it
                options.update(num_gpus=1, max_calls=1)
            ref = task.options(**options)
            pending[ref.remote(job)] = (job, time.perf_counter())
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job, started = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as error:  # the worker or its node died, the task was cancelled
                    outcome = TrialOutcome(FAILED, f"Ray: {type(error).__name__}: {_first_line(error)}; see "
                                                   f"{log_path(job.sweep_dir, job.name)}",
                                           seconds=time.perf_counter() - started)
                on_done(job, outcome)
