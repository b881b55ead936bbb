"""``foxhunt tune``: an Optuna hyperparameter search over training runs (``foxhunt.tune``)."""

from __future__ import annotations

from pathlib import Path

import click
import torch
from rich.console import Console
from rich.table import Table

from foxhunt.cli.common import config_options
from foxhunt.errors import ConfigError, FoxhuntError

__all__ = ["tune_command"]

console = Console()
EXECUTORS = ("local", "ray")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:+.4g}"


def _trials_table(study, title: str) -> Table:
    from foxhunt.tune.study import trial_rows

    rows = trial_rows(study)
    keys = list(dict.fromkeys(key for row in rows for key in row.params))
    table = Table("trial", "state", "value", *keys, "last step", "seconds", "run directory", title=title)
    for row in rows:
        params = [_param(row.params.get(key)) for key in keys]
        seconds = "" if row.seconds is None else f"{row.seconds:.1f}"
        step = "" if row.last_step is None else str(row.last_step)
        value = _number(row.value) if row.state == "complete" else ""  # a pruned trial's value is only its last report
        table.add_row(str(row.number), row.state, value, *params, step, seconds, row.run_dir)
    return table


def _param(value) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _print_best(study) -> None:
    from foxhunt.tune.study import METRIC_ATTR, SOURCES_ATTR, import_optuna

    optuna = import_optuna()
    complete = [t for t in study.trials if t.state is optuna.trial.TrialState.COMPLETE]
    if not complete:
        console.print("no trial has completed yet: no best parameters")
        return
    best = study.best_trial
    metric = study.user_attrs.get(METRIC_ATTR, "objective")
    over = "each data source's mean" if study.user_attrs.get(SOURCES_ATTR) else "mean"
    console.print(f"best: trial {best.number}, {metric} {best.value:+.4f} (validation, {over} of each fold's best epoch)")
    for override in best.user_attrs.get("overrides", []):
        console.print(f"  --set {override}")
    if best.user_attrs.get("run_dir"):
        console.print(f"  run directory: {best.user_attrs['run_dir']}")


def _print_sources(study) -> None:
    from foxhunt.tune.study import SOURCES_ATTR

    sources = study.user_attrs.get(SOURCES_ATTR)
    if sources:
        console.print(f"each trial trains on {len(sources)} data sources, its objective their mean: {', '.join(sources)}")


def _check_session(session) -> None:
    if session and all(t.state.name == "FAIL" for t in session):
        raise FoxhuntError(f"every trial of this session failed; the first: {session[0].user_attrs.get('error', '?')}")


def _resume_hint(name: str, study_dir, storage) -> str:
    return (f"foxhunt tune --study {name}" + (f" --dir {study_dir}" if study_dir is not None else "")
            + (f" --storage {storage}" if storage is not None else ""))


def _run_workers(spec, *, executor, workers, ray_address, trials, timeout, seed, device, study_dir, storage) -> None:
    """--workers N or --executor ray: the study started here, its trials run by workers sharing --trials."""
    from foxhunt.profiles import device_name
    from foxhunt.trainer.interrupt import StopFlag
    from foxhunt.tune.study import load_study, start_study
    from foxhunt.tune.workers import run_local, run_ray, worker_jobs

    start_study(spec)  # before any worker: each finds the study, its base config and space in the storage
    before = {trial.number for trial in load_study(spec.name, spec.storage).trials}
    # Workers log warnings only: each runs whole trainings, whose info lines would bury the per-trial lines.
    debug = click.get_current_context().meta.get("foxhunt.debug", False)
    jobs = worker_jobs(spec.name, spec.directory, spec.storage, trials=trials, workers=workers,
                       threads=max(1, spec.base.run.threads), timeout=timeout, seed=seed, device=device,
                       log_level="debug" if debug else "warning")
    gpu = device_name(device or spec.base.run.device) == "cuda"
    console.print(f"study {spec.name}: {spec.direction} validation {spec.metric}; storage {spec.storage}")
    if spec.sources:
        console.print(f"each trial trains on {len(spec.sources)} data sources in turn: {', '.join(spec.sources)}")
    console.print(f"{len(jobs)} workers on {executor}, trials {', '.join(str(job.trials) for job in jobs)}")
    if executor == "ray":
        problems = run_ray(jobs, address=ray_address, gpu=gpu)
        stopped = False
    else:
        with StopFlag() as stop:  # Ctrl-C reaches the workers too: wait for them to stop at their epoch boundary
            problems = run_local(jobs, gpus=torch.cuda.device_count() if gpu else 0)
        stopped = stop.requested
    study = load_study(spec.name, spec.storage)
    session = [trial for trial in study.trials if trial.number not in before]
    console.print(_trials_table(study, f"study {spec.name}: {len(study.trials)} trials"))
    _print_best(study)
    if stopped:
        console.print(f"interrupted; continue with: {_resume_hint(spec.name, study_dir, storage)}")
        return
    if problems:
        raise FoxhuntError("some workers did not finish their trials (a worker's running trial is marked failed by "
                           f"the study's heartbeat); continue with `{_resume_hint(spec.name, study_dir, storage)}`:\n"
                           + "\n".join(f"  {line}" for line in problems))
    _check_session(session)


@click.command("tune")
@config_options
@click.option("--space", "space_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Search space TOML (needed to start a study; a resumed study keeps its own).")
@click.option("--study", "study_name", default="default", show_default=True, metavar="NAME",
              help="Study name: the same name continues the study.")
@click.option("--trials", type=click.IntRange(min=1), default=10, show_default=True,
              help="Trials to add in this invocation.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Start no new trial after this many seconds (a running trial finishes).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the TPE sampler.")
@click.option("--data", "data_sources", metavar="SOURCE", multiple=True,
              help="Data of every trial (as in `foxhunt train --data`). Repeat it to train each trial on every "
                   "source in turn; the objective is then the mean of their objectives.")
@click.option("--storage", metavar="URL", help="Optuna RDB URL (default: sqlite:///DIR/study.db), e.g. postgresql://host/db.")
@click.option("--dir", "study_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Study directory holding the trial runs (default: runs/tune/NAME).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where trials train (default: the config's). A new study's device also picks its run-size profile.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Workers running trials side by side, sharing --trials (1: trials one after another in this "
                   "process).")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
              help="local: worker processes on this machine; ray: Ray tasks on a local or existing Ray cluster.")
@click.option("--ray-address", metavar="ADDRESS", help="Join an existing Ray cluster (e.g. 10.0.0.1:6379, or auto) "
                                                       "instead of starting a local one.")
@click.option("--show", is_flag=True, help="Print the study's trials and best parameters, and run nothing.")
def tune_command(config_path, overrides, space_path, study_name, trials, timeout, seed, data_sources, storage, study_dir,
                 device, workers, executor, ray_address, show) -> None:
    """Search hyperparameters with Optuna: each trial is an ordinary training run.

    \b
    Example (space.toml):
      [space."learner.lr"]
      type = "float"
      low = 1e-5
      high = 1e-3
      log = true
      [space."learner.n_step"]
      type = "int"
      low = 1
      high = 5
      [space."learner.hidden"]
      type = "categorical"
      choices = [[64, 64], [128, 128]]

    \b
      foxhunt tune --study lr --space space.toml --trials 20 --data eurusd-1h-2017
      foxhunt tune --study lr --trials 10        # resume: 10 more trials
      foxhunt tune --study lr --show             # trials and best parameters
      foxhunt tune --study suite --space space.toml --trials 40 \\
        --data 'synthetic:ar1?phi=0.05&seed=11' --data 'synthetic:meanrev?seed=11'  # every trial on both
      foxhunt tune --study lr --trials 20 --workers 4                  # 4 processes
      foxhunt tune --study lr --trials 20 --workers 8 --executor ray   # Ray tasks
      foxhunt tune --study lr --trials 20 --workers 8 --executor ray \\
        --ray-address 10.0.0.1:6379 --dir /shared/tune/lr   # on a cluster

    Space keys are dotted config keys, applied to each trial as --set KEY=VALUE
    on top of the base config (--config, --set, --data). The TPE sampler
    (seeded by --seed) proposes values; a median pruner stops a trial whose
    validation metric (train.validation_metric) at an epoch is worse than the
    median of earlier trials at the same epoch. The objective is the mean over
    folds of each fold's best validation value (with several --data, the mean
    of each source's): tuning selects on validation,
    so judge the chosen parameters on data the study never saw. The study is
    stored in SQLite under the study directory (or --storage), and runs go to
    runs/tune/NAME/trial_NNNN. --workers N runs N workers on the study, each
    a share of --trials (a Ray worker must reach the storage: the default
    SQLite file must be on a filesystem every node mounts). See docs/tune.md.
    """
    from foxhunt.trainer.interrupt import StopFlag
    from foxhunt.tune.study import (
        default_directory, default_storage, import_optuna, load_study, prepare_study, run_study, trial_line,
    )

    if executor == "ray":
        from foxhunt.sweep.ray_cluster import import_ray

        import_ray()  # a missing Ray is one paragraph before the study is touched
    elif ray_address is not None:
        raise ConfigError("--ray-address is for --executor ray")
    directory = study_dir if study_dir is not None else default_directory("runs", study_name)
    url = storage or default_storage(directory)
    if show:
        if space_path is not None or config_path is not None or overrides or data_sources:
            raise ConfigError("--show only reads a study; drop --space, --config, --set and --data")
        study = load_study(study_name, url)
        console.print(_trials_table(study, f"study {study_name} ({url})"))
        _print_sources(study)
        _print_best(study)
        return
    spec = prepare_study(study_name, directory, url, space_path=space_path, config_path=config_path,
                         overrides=list(overrides), device=device, sources=data_sources)
    if spec.base.run.threads:
        torch.set_num_threads(spec.base.run.threads)  # the program, not the library, sizes the thread pool
    if workers > 1 or executor == "ray":
        _run_workers(spec, executor=executor, workers=workers, ray_address=ray_address, trials=trials,
                     timeout=timeout, seed=seed, device=device, study_dir=study_dir, storage=storage)
        return
    optuna = import_optuna()
    # Trial outcomes are printed below, one line each; optuna's own INFO lines (and its tracebacks for
    # failed trials, whose messages are kept on the trials) would repeat them.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    session = []

    def on_trial(study, trial) -> None:
        session.append(trial)
        console.print(trial_line(trial))

    console.print(f"study {spec.name}: {spec.direction} validation {spec.metric}; storage {spec.storage}")
    if spec.sources:
        console.print(f"each trial trains on {len(spec.sources)} data sources in turn: {', '.join(spec.sources)}")
    with StopFlag() as stop:
        study = run_study(spec, trials=trials, timeout=timeout, seed=seed, device=device, user_stop=stop,
                          on_trial=on_trial)
    console.print(_trials_table(study, f"study {spec.name}: {len(study.trials)} trials"))
    _print_best(study)
    if stop.requested:
        console.print(f"interrupted; continue with: {_resume_hint(spec.name, study_dir, storage)}")
        return
    _check_session(session)
