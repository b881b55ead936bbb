"""One worker of a study: :func:`run_worker` runs its share of the trials in this process.

``foxhunt tune --workers N`` starts N workers on one study (:mod:`foxhunt.tune.workers`): processes
``python -m foxhunt.tune.worker`` (``--executor local``) or Ray tasks (``--executor ray``). The command has
already started the study in its storage (:func:`foxhunt.tune.study.start_study`); each worker opens it from
there, as a resume without arguments would, and runs :func:`foxhunt.tune.study.run_trials`. Optuna
coordinates the workers through the storage, so their trial numbers, and so their run directories, never
collide, and the heartbeats mark a killed worker's trial failed.

Exit codes are those of ``foxhunt train`` (:mod:`foxhunt.cli.common`): 0 the worker ran its share, 2 a
foxhunt error (printed as one paragraph), 3 stopped early by SIGTERM or Ctrl-C, 1 a bug (a traceback).

A worker logs warnings and errors only (``log_level``, ``--debug`` on ``foxhunt tune`` makes it ``debug``):
every worker runs every trial's training, whose info lines (about 45 a run) would bury the one line per
trial that each worker prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import attrs

__all__ = ["SEED_STRIDE", "LOG_LEVELS", "WorkerJob", "run_worker", "configure_worker_logging", "main"]

# Worker k's sampler seed is seed + k * SEED_STRIDE: workers that open the study at the same moment see the
# same stored-trial count (the seed's offset, foxhunt.tune.study._open) and would otherwise draw the same
# random start-up trials. The stride is far above any trial count, so worker seeds never meet.
SEED_STRIDE = 1_000_003
LOG_LEVELS = ("debug", "info", "warning")


@attrs.frozen
class WorkerJob:
    """One worker: which study (name, directory, storage), its share of the trials, and how it runs them."""

    study: str
    directory: Path
    storage: str
    trials: int
    index: int = 0
    threads: int = 1
    timeout: float | None = None
    seed: int = 0
    device: str | None = None
    log_level: str = attrs.field(default="warning", validator=attrs.validators.in_(LOG_LEVELS))

    def command(self, python: str | None = None) -> list[str]:
        """The argv of this worker as a process of its own."""
        argv = [python or sys.executable, "-m", "foxhunt.tune.worker", self.study, "--dir",
                str(Path(self.directory).absolute()), "--storage", self.storage, "--trials", str(self.trials),
                "--index", str(self.index), "--threads", str(self.threads), "--seed", str(self.seed)]
        if self.timeout is not None:
            argv += ["--timeout", repr(self.timeout)]
        if self.device is not None:
            argv += ["--device", self.device]
        return argv + ["--log-level", self.log_level]


def configure_worker_logging(job: WorkerJob) -> None:
    """A worker's process logs at ``job.log_level`` (to stderr, as `foxhunt tune` does). Called by the process
    that runs the worker (this module's ``main``, a Ray task's body), never by the library."""
    import logging

    from foxhunt.cli.logs import configure_logging

    configure_logging(level=getattr(logging, job.log_level.upper()))


def run_worker(job: WorkerJob, user_stop=None) -> int:
    """Run ``job.trials`` trials of the started study in this process; returns the exit code."""
    import numba
    import torch

    from foxhunt.cli.common import EXIT_STOPPED, EXIT_USER_ERROR
    from foxhunt.errors import FoxhuntError
    from foxhunt.tune.study import import_optuna, prepare_study, run_trials, trial_line

    # The worker's share of the machine: without this, workers side by side would each use every core.
    torch.set_num_threads(job.threads)
    numba.set_num_threads(min(job.threads, numba.config.NUMBA_NUM_THREADS))
    try:
        spec = prepare_study(job.study, Path(job.directory), job.storage)
        optuna = import_optuna()
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # one line per trial, below, as `foxhunt tune` prints
        run_trials(spec, trials=job.trials, timeout=job.timeout, seed=job.seed + job.index * SEED_STRIDE,
                   device=job.device, user_stop=user_stop,
                   on_trial=lambda study, trial: print(trial_line(trial), flush=True))
    except FoxhuntError as error:
        print(f"error: worker {job.index}: {error}", file=sys.stderr, flush=True)
        return EXIT_USER_ERROR
    return EXIT_STOPPED if user_stop is not None and user_stop.requested else 0


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m foxhunt.tune.worker", description=__doc__.splitlines()[0])
    parser.add_argument("study")
    parser.add_argument("--dir", dest="directory", type=Path, required=True)
    parser.add_argument("--storage", required=True)
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="warning")
    args = parser.parse_args(argv)
    from foxhunt.trainer.interrupt import StopFlag

    job = WorkerJob(args.study, args.directory, args.storage, args.trials, args.index, args.threads, args.timeout,
                    args.seed, args.device, args.log_level)
    configure_worker_logging(job)  # a program, not the library: this process may configure logging
    with StopFlag() as stop:  # Ctrl-C on the terminal reaches every worker: each stops at its epoch boundary
        code = run_worker(job, stop)
    sys.exit(code)


if __name__ == "__main__":
    main()
