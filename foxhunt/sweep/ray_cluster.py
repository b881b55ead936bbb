"""The ``ray`` executor: trials as Ray tasks on a local cluster or an existing one (``--ray-address``).

Each task asks Ray for the trial's CPU threads and, for a CUDA config, one GPU
(``num_gpus=1``; Ray sets ``CUDA_VISIBLE_DEVICES`` to it), then starts the same
trial process as the local executor on whichever node Ray chose, and returns its
exit status. A trial killed mid-run is a negative exit status like any other; a
Ray worker or node that dies under it is Ray's exception, caught here and recorded
as the trial's reason. Tasks are never retried by Ray: ``foxhunt sweep --retry``
decides what runs again.

Every node writes its trials into the sweep directory by the driver's path, so
on several machines that directory must be on a filesystem every node mounts at
the same path (docs/sweep.md). Ray is imported only here, when a sweep runs on it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from foxhunt.errors import FoxhuntError
from foxhunt.sweep.local import OnDone, TrialJob, log_path, run_process
from foxhunt.sweep.outcome import FAILED, TrialOutcome

__all__ = ["import_ray", "RayExecutor"]


def import_ray() -> Any:
    """ray, or one paragraph saying how to install it (it is the ``sweep`` extra)."""
    try:
        import ray
    except ImportError:
        raise FoxhuntError("foxhunt sweep --executor ray needs Ray, which is not installed: pip install "
                           "'foxhunt[sweep]' (or pip install 'ray>=2.9') on this machine and on every node of the "
                           "cluster; --executor local needs nothing more") from None
    return ray


def _run_on_node(job: TrialJob) -> TrialOutcome:
    """The body of a Ray task: the trial process on this node, or why it cannot run here."""
    if not Path(job.sweep_dir).is_dir():
        return TrialOutcome(FAILED, f"the sweep directory {job.sweep_dir} is not visible on node "
                                    f"{socket.gethostname()}: put it on a filesystem every node mounts at the same "
                                    "path (docs/sweep.md)", host=socket.gethostname())
    return run_process(job)


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
        ray = import_ray()
        started_here = not ray.is_initialized()
        if started_here:
            options = {"include_dashboard": False, **self.init_options}
            ray.init(address=self.address, **options) if self.address else ray.init(**options)
        try:
            self._run(ray, jobs, on_done)
        finally:
            if started_here:
                ray.shutdown()

    def _run(self, ray: Any, jobs: Sequence[TrialJob], on_done: OnDone) -> None:
        task = ray.remote(max_retries=0)(_run_on_node)
        pending: dict[Any, tuple[TrialJob, float]] = {}
        for job in jobs:
            ref = task.options(num_cpus=job.threads, num_gpus=1 if job.gpu else 0, name=f"foxhunt-trial-{job.name}")
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
