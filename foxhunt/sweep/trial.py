"""One sweep trial: :func:`run_trial`, run as ``python -m foxhunt.sweep.trial SWEEP_DIR NAME`` or in a Ray worker.

The local executor starts each trial as a process of its own
(:func:`foxhunt.sweep.local.trial_command`), and the Ray executor runs it in the
worker process Ray gives its task, so a trial that crashes, runs out of memory
or is killed takes only its own process down; the executor reads what happened
from the exit code :func:`run_trial` returns, the process's exit status or
Ray's error (:mod:`foxhunt.sweep.outcome`).
The process trains the trial as ``foxhunt train`` would — the base config plus
the trial's overrides, ``run.seed`` and ``folds.only`` — into ``SWEEP_DIR/NAME``,
writes ``sweep_trial.json`` there (which sweep, which trial, the process id),
and builds the run's ``report.html`` (unless the sweep was started with
``--no-reports``), which links back to ``sweep.html``.

Exit codes are those of ``foxhunt train`` (:mod:`foxhunt.cli.common`): 0 the run
finished, 2 a foxhunt error (printed as one paragraph), 3 stopped early by
SIGTERM or Ctrl-C, 4 stopped by its regression bands, 1 a bug (a traceback).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from foxhunt.trainer.report import SWEEP_TRIAL_FILE

__all__ = ["TRIAL_RECORD", "run_trial", "main"]

# Written into each trial's run directory; the run's report.html links to its sweep when it finds it.
TRIAL_RECORD = SWEEP_TRIAL_FILE


def run_trial(sweep_dir: Path, name: str, threads: int) -> int:
    """Train trial ``name`` into ``sweep_dir/name``; returns the process's exit code."""
    import structlog
    import torch

    from foxhunt.cli.common import EXIT_OUT_OF_BAND, EXIT_STOPPED, EXIT_USER_ERROR
    from foxhunt.config_checks import check_config
    from foxhunt.errors import BandStop, FoxhuntError
    from foxhunt.sweep.plan import read_plan
    from foxhunt.trainer.interrupt import StopFlag
    from foxhunt.trainer.report import build_report
    from foxhunt.trainer.run_dir import RunDirectory
    from foxhunt.trainer.trainer import Trainer

    import numba

    # The trial's share of the machine: without this, trials side by side would each use every core.
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    sweep_dir = Path(sweep_dir)
    try:
        plan = read_plan(sweep_dir)
        trial = plan.trial(name)
        config = check_config(plan.trial_config(trial))  # refused before the run directory exists
        run_dir = RunDirectory(sweep_dir / name)
    except FoxhuntError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR
    structlog.contextvars.bind_contextvars(trial=name)
    run_dir.write_json(TRIAL_RECORD, {
        "sweep": "..", "trial": name, "variant": trial.variant, "label": trial.label, "seed": trial.seed,
        "fold": trial.fold, "overrides": trial.all_overrides, "pid": os.getpid(), "host": socket.gethostname(),
    })
    with StopFlag() as stop:
        try:
            summary = Trainer(config, run_dir, stop=stop, show_progress=False).run()
        except BandStop as reason:
            if plan.reports:
                build_report(run_dir.path)
            print(f"error: {reason}", file=sys.stderr)
            return EXIT_OUT_OF_BAND
        except FoxhuntError as error:
            if plan.reports and (run_dir.path / "summary.json").is_file():
                build_report(run_dir.path)  # a numerical fault: summary.json and the report name it
            print(f"error: {error}", file=sys.stderr)
            return EXIT_USER_ERROR
        finally:
            run_dir.release()
    if summary is None:
        print("error: stopped early (SIGTERM or Ctrl-C) before the run finished", file=sys.stderr)
        return EXIT_STOPPED
    if plan.reports:
        build_report(run_dir.path)
    return 0


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m foxhunt.sweep.trial", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("name")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    # A program, not the library: this process may configure logging (JSON lines into the trial's log file).
    from foxhunt.cli.logs import configure_logging

    configure_logging(debug=False, json_logs=True)
    sys.exit(run_trial(args.sweep_dir, args.name, args.threads))


if __name__ == "__main__":
    main()
