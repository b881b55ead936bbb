"""Open or resume an Optuna study in its storage, and run its trials as ordinary training runs.

A study lives in two places:

- its **storage** (an RDB URL; by default ``sqlite:///STUDY_DIR/study.db``) holds the trials, their
  parameters, reports and values, plus what the study was started with: the resolved base config
  and the search space (study user attributes), so a resumed study needs neither again;
- its **directory** (by default ``runs/tune/NAME``) holds ``base.toml``, ``space.toml`` and one run
  directory per trial, ``trial_NNNN/``, each with its ``trial.json`` (parameters, state, objective).

A study over several data sources (``foxhunt tune --data A --data B``) trains each trial once per source,
one after another, in ``trial_NNNN/data_K/``; the trial's objective is the mean of the sources' objectives,
so the parameters chosen are those that do well on all of them rather than on one market's noise.

Optuna is imported here only inside functions: ``foxhunt --help`` stays fast and the ``tune``
extra stays optional.
"""

from __future__ import annotations

import json
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from foxhunt.config import FoxhuntConfig, dump_config, load_config, structure_config
from foxhunt.config_checks import check_config
from foxhunt.config_loading import apply_overrides
from foxhunt.errors import ConfigError, FoxhuntError
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer
from foxhunt.tune.objective import EpochReporter, TrialStop, direction_of
from foxhunt.tune.space import SearchSpace, check_space, load_space, parse_space

if TYPE_CHECKING:
    import optuna

__all__ = ["StudySpec", "import_optuna", "default_directory", "default_storage", "prepare_study", "load_study",
           "run_trial", "start_study", "run_study", "run_trials", "TrialRow", "trial_rows", "trial_line",
           "trial_record"]

log = structlog.get_logger(__name__)

BASE_CONFIG_ATTR = "foxhunt.base_config"
SPACE_ATTR = "foxhunt.space"
METRIC_ATTR = "foxhunt.metric"
SOURCES_ATTR = "foxhunt.sources"
# Keys that say where a trial runs, not what it learns: a resumed study may change them.
WHERE_KEYS = ("run.device", "run.threads")
# Seconds between a running trial's heartbeats, and after which a silent trial (its process was killed)
# is marked failed by the next process that runs a trial of the study.
SQLITE_PREFIX = "sqlite:///"
HEARTBEAT_S = 60
GRACE_S = 180
SQLITE_TIMEOUT_S = 60


def import_optuna():
    """optuna, or an error saying how to install it (it is the ``tune`` extra)."""
    try:
        import optuna
    except ImportError:
        raise FoxhuntError("foxhunt tune needs optuna: pip install 'foxhunt[tune]' (or pip install optuna)") from None
    return optuna


def default_directory(out_dir: str | Path, name: str) -> Path:
    return Path(out_dir) / "tune" / name


def default_storage(directory: Path) -> str:
    return f"{SQLITE_PREFIX}{(Path(directory) / 'study.db').resolve()}"


@attrs.frozen
class StudySpec:
    """Everything a study's trials are built from."""

    name: str
    directory: Path
    storage: str
    base_config: str  # the resolved base config, as TOML (what config.toml of a run holds)
    space: SearchSpace
    # Two or more data sources every trial trains on in turn (its objective is their mean); empty: the base
    # config's data.source alone.
    sources: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @property
    def base(self) -> FoxhuntConfig:
        return self.trial_config([])

    @property
    def metric(self) -> str:
        return self.base.train.validation_metric

    @property
    def direction(self) -> str:
        return direction_of(self.metric)

    def trial_config(self, overrides: list[str]) -> FoxhuntConfig:
        data = apply_overrides(tomllib.loads(self.base_config), overrides)
        source = f"study {self.name} base config" + (f" + --set {' '.join(overrides)}" if overrides else "")
        return structure_config(data, source)

    def source_overrides(self) -> list[list[str]]:
        """The extra ``--set`` of each run a trial trains: one per data source (none for a one-source study)."""
        from foxhunt.tune.space import override_text

        return [[f"data.source={override_text(source)}"] for source in self.sources] or [[]]


def _storage(url: str, *, create: bool):
    """Optuna's RDB storage at ``url``, with heartbeats; a missing SQLite file is created only if ``create``."""
    optuna = import_optuna()
    if url.startswith(SQLITE_PREFIX):
        database = Path(url.removeprefix(SQLITE_PREFIX))
        if not create and not database.exists():
            raise FoxhuntError(f"no study database at {database}; check --study, --dir and --storage")
        database.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            # heartbeats are marked experimental; they are what marks a killed process's trial as failed
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
                                              engine_kwargs=_engine_options(url))
    except Exception as error:  # sqlalchemy raises its own tree (bad URL, missing driver, unreachable server)
        raise FoxhuntError(f"cannot open the study storage {url}: {error}; give a reachable RDB URL with --storage") from None


def _engine_options(url: str) -> dict[str, Any]:
    """SQLite waits up to SQLITE_TIMEOUT_S for another process's write lock (`--workers`, several
    `foxhunt tune` processes) instead of failing with "database is locked" after sqlite3's default 5 s."""
    return {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}


def _stored(url: str, name: str) -> tuple[str, str, tuple[str, ...]] | None:
    """The base config, space and data sources a stored study was started with, or None if there is no
    such study."""
    optuna = import_optuna()
    if url.startswith(SQLITE_PREFIX) and not Path(url.removeprefix(SQLITE_PREFIX)).exists():
        return None  # a new study: its database is created when its first trial starts, not before
    storage = _storage(url, create=False)
    if name not in optuna.study.get_all_study_names(storage):
        return None
    attrs_ = optuna.load_study(study_name=name, storage=storage).user_attrs
    if BASE_CONFIG_ATTR not in attrs_ or SPACE_ATTR not in attrs_:
        raise FoxhuntError(f"study {name!r} in this storage was not made by foxhunt tune; choose another --study name")
    return attrs_[BASE_CONFIG_ATTR], attrs_[SPACE_ATTR], tuple(attrs_.get(SOURCES_ATTR, ()))


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _config_differences(stored: str, given: str) -> list[str]:
    old, new = _flat(tomllib.loads(stored)), _flat(tomllib.loads(given))
    keys = sorted(k for k in old.keys() | new.keys() if k not in WHERE_KEYS and old.get(k) != new.get(k))
    return [f"{k}: {old.get(k, '(unset)')!r} in the study, {new.get(k, '(unset)')!r} now" for k in keys]


def prepare_study(
    name: str,
    directory: Path,
    storage: str,
    *,
    space_path: Path | None = None,
    config_path: Path | None = None,
    overrides: tuple[str, ...] | list[str] = (),
    device: str | None = None,
    sources: tuple[str, ...] | list[str] = (),
) -> StudySpec:
    """The spec of study ``name``: a new one from the space file and base config, or the stored one.

    ``sources`` are the trials' data (``--data``, repeatable): one is the base config's ``data.source``;
    two or more make every trial train on each in turn. A resumed study keeps its own.

    Resuming with no space or config arguments continues exactly what was started; giving them again
    is allowed when they resolve to the same base config and space (re-running the same command),
    and refused with the differences otherwise, since trials of different setups are not comparable.
    ``device`` is part of a new study's base config (it picks the run-size profile); a resumed study
    keeps its sizes, and :func:`run_study` may still move its trials to another device.
    """
    stored = _stored(storage, name)
    sources = tuple(sources)
    if len(set(sources)) != len(sources):
        repeated = sorted({source for source in sources if sources.count(source) > 1})
        raise ConfigError(f"--data names {', '.join(repeated)} more than once; give each data source once")
    if sources:
        from foxhunt.tune.space import override_text

        # the first source is the base config's: it is what base.toml and a one-source study train on
        overrides = [*overrides, f"data.source={override_text(sources[0])}"]
    given_sources = sources if len(sources) > 1 else ()
    given_base = None
    if config_path is not None or overrides or stored is None:
        # the device goes in before the run-size profile is resolved, as for `foxhunt train --device`
        device_override = [f'run.device="{device}"'] if device is not None else []
        given_base = dump_config(load_config(config_path, [*overrides, *device_override]))
    given_space = None
    if space_path is not None:
        given_space = load_space(space_path)
        check_space(given_space, tomllib.loads(given_base or stored[0]), str(space_path))
    if stored is None:
        if given_space is None:
            raise ConfigError(f"study {name!r} does not exist yet in {storage}; start it with --space FILE")
        if any(Path(directory).glob("trial_*")):
            raise ConfigError(
                f"{directory} already holds trial runs, but {storage} has no study {name!r} (was its storage moved "
                "or deleted?); give the study's --storage, or start a new --study name"
            )
        return StudySpec(name, Path(directory), storage, given_base, given_space, given_sources)
    base, space_text, stored_sources = stored
    stored_space = parse_space(tomllib.loads(space_text), f"study {name!r} space")
    if sources and given_sources != stored_sources:
        raise ConfigError(
            f"study {name!r} was started with data {', '.join(stored_sources) or 'of its base config'}, not "
            f"{', '.join(sources)}; resume it without --data, or start a new --study"
        )
    if given_base is not None and (differences := _config_differences(base, given_base)):
        raise ConfigError(
            f"study {name!r} was started with another base config; resume it without --config/--set/--data, "
            "or start a new --study. Differences:\n" + "\n".join(f"  {line}" for line in differences)
        )
    if given_space is not None and given_space != stored_space:
        raise ConfigError(
            f"study {name!r} was started with another search space (see {Path(directory) / 'space.toml'}); "
            "resume it without --space, or start a new --study"
        )
    return StudySpec(name, Path(directory), storage, base, stored_space, stored_sources)


def load_study(name: str, storage: str) -> optuna.Study:
    """An existing study, for reading (``foxhunt tune --show``)."""
    optuna = import_optuna()
    opened = _storage(storage, create=False)
    names = optuna.study.get_all_study_names(opened)
    if name not in names:
        known = ", ".join(sorted(names)) or "none"
        raise FoxhuntError(f"no study {name!r} in {storage} (studies there: {known}); check --study and --storage")
    return optuna.load_study(study_name=name, storage=opened)


def start_study(spec: StudySpec) -> None:
    """Create the study in its storage (or find it), storing its base config and space, and write
    ``base.toml`` and ``space.toml`` into its directory. Workers of one study (:mod:`foxhunt.tune.workers`)
    find it there: one process starts it before any of them runs."""
    optuna = import_optuna()
    spec.directory.mkdir(parents=True, exist_ok=True)
    (spec.directory / "base.toml").write_text(spec.base_config, encoding="utf-8")
    (spec.directory / "space.toml").write_text(spec.space.to_toml(), encoding="utf-8")
    storage = _storage(spec.storage, create=True)
    study = optuna.create_study(study_name=spec.name, storage=storage, direction=spec.direction, load_if_exists=True)
    study.set_user_attr(BASE_CONFIG_ATTR, spec.base_config)
    study.set_user_attr(SPACE_ATTR, spec.space.to_toml())
    study.set_user_attr(METRIC_ATTR, spec.metric)
    if spec.sources:
        study.set_user_attr(SOURCES_ATTR, list(spec.sources))


def _open(spec: StudySpec, seed: int, pruner: Any) -> optuna.Study:
    optuna = import_optuna()
    storage = _storage(spec.storage, create=False)
    trials = len(optuna.load_study(study_name=spec.name, storage=storage).trials)
    # A seeded sampler restarts its random stream in every process; offsetting the seed by the trials
    # already stored keeps a resumed study from drawing its first trials' parameters again.
    sampler = optuna.samplers.TPESampler(seed=seed + trials, n_startup_trials=spec.space.sampler.startup_trials)
    if pruner is None:
        settings = spec.space.pruner
        pruner = optuna.pruners.MedianPruner(n_startup_trials=settings.startup_trials, n_warmup_steps=settings.warmup_steps)
    return optuna.load_study(study_name=spec.name, storage=storage, sampler=sampler, pruner=pruner)


def _write_trial(run_dir: RunDirectory, record: dict[str, Any]) -> None:
    run_dir.write_json("trial.json", record)


def run_trial(spec: StudySpec, trial: optuna.Trial, *, device: str | None = None, user_stop: Any = None) -> float:
    """Train one trial of ``spec`` as a run in ``STUDY_DIR/trial_NNNN`` (one run per data source of a study
    over several, in ``trial_NNNN/data_K``); returns its objective.

    This is the objective :func:`run_study` gives ``study.optimize``; anything that asks a study for
    trials (``study.ask()``, in any process that reaches the storage) can run them with it and
    ``study.tell`` the result. Raises ``optuna.TrialPruned`` when the pruner stopped the run, and a
    :class:`FoxhuntError` when the run failed or ``user_stop`` ended it early (the message says which,
    and is kept on the trial as its ``error`` attribute).
    """
    optuna = import_optuna()
    params = spec.space.suggest(trial)
    overrides = spec.space.overrides(params)
    path = spec.directory / f"trial_{trial.number:04d}"
    trial.set_user_attr("run_dir", str(path))
    trial.set_user_attr("overrides", overrides)
    record = {"study": spec.name, "trial": trial.number, "params": params, "overrides": overrides,
              "metric": spec.metric, "direction": spec.direction}
    if spec.sources:
        record["sources"] = list(spec.sources)
    stop = TrialStop(user_stop)
    trial_dir = None
    objectives: list[float] = []
    step = None
    structlog.contextvars.bind_contextvars(trial=trial.number)
    try:
        configs = []
        for extra in spec.source_overrides():
            config = spec.trial_config([*overrides, *extra])
            if device is not None:
                config = attrs.evolve(config, run=attrs.evolve(config.run, device=device))
            check_config(config)  # a trial's values can be refused before its run directory exists
            configs.append(config)
        trial_dir = RunDirectory(path) if not spec.sources else _TrialDirectory(path)
        _write_trial(trial_dir, record | {"state": "running"})
        offset = 0
        for index, config in enumerate(configs):
            run_dir = trial_dir if not spec.sources else RunDirectory(path / f"data_{index}")
            reporter = EpochReporter(trial, spec.metric, config.train.most_fold_epochs, stop, offset)
            summary = Trainer(config, run_dir, stop=stop, show_progress=False, on_epoch=reporter).run()
            step = reporter.last_step
            if stop.pruned or summary is None:
                break
            objectives.append(reporter.objective())
            offset += config.folds.n_folds * config.train.most_fold_epochs
    except FoxhuntError as error:
        trial.set_user_attr("error", str(error))
        if trial_dir is not None:
            _write_trial(trial_dir, record | {"state": "failed", "error": str(error)})
        raise
    finally:
        structlog.contextvars.unbind_contextvars("trial")
    if stop.pruned:
        _write_trial(trial_dir, record | {"state": "pruned", "step": step})
        raise optuna.TrialPruned(f"pruned at step {step}")
    if len(objectives) < len(configs):
        message = f"interrupted at step {step}; `foxhunt tune --study {spec.name}` continues the study"
        trial.set_user_attr("error", message)
        _write_trial(trial_dir, record | {"state": "interrupted", "step": step})
        raise FoxhuntError(message)
    value = sum(objectives) / len(objectives)
    extra = {"source_objectives": objectives} if spec.sources else {}
    _write_trial(trial_dir, record | {"state": "complete", "objective": value, "step": step, **extra})
    return value


class _TrialDirectory:
    """The directory of a trial over several data sources: ``trial.json`` beside one run directory per source."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def write_json(self, name: str, value: dict[str, Any]) -> None:
        (self.path / name).write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def run_study(
    spec: StudySpec,
    *,
    trials: int | None,
    timeout: float | None = None,
    seed: int = 0,
    device: str | None = None,
    user_stop: Any = None,
    pruner: Any = None,
    on_trial: Callable[[optuna.Study, Any], None] | None = None,
) -> optuna.Study:
    """Start (or resume) the study and run up to ``trials`` more trials (and/or until ``timeout`` seconds)
    in this process; returns the study. :func:`run_trials` says what happens to each trial."""
    start_study(spec)
    return run_trials(spec, trials=trials, timeout=timeout, seed=seed, device=device, user_stop=user_stop,
                      pruner=pruner, on_trial=on_trial)


def run_trials(
    spec: StudySpec,
    *,
    trials: int | None,
    timeout: float | None = None,
    seed: int = 0,
    device: str | None = None,
    user_stop: Any = None,
    pruner: Any = None,
    on_trial: Callable[[optuna.Study, Any], None] | None = None,
) -> optuna.Study:
    """Run up to ``trials`` more trials of a started study (:func:`start_study`) in this process.

    ``pruner`` replaces the space file's median pruner (tests use it to force a prune). A trial that
    raises a :class:`FoxhuntError` is recorded as failed with its message and the study goes on; a
    Ctrl-C (``user_stop`` requested) ends the running trial at its next epoch boundary, records it
    failed as interrupted, and ends the study.
    """
    study = _open(spec, seed, pruner)

    def objective(trial: optuna.Trial) -> float:
        return run_trial(spec, trial, device=device, user_stop=user_stop)

    def stop_when_asked(study: optuna.Study, trial: Any) -> None:
        # Runs after every recorded trial, so a Ctrl-C during a trial or between two starts no new one.
        if user_stop is not None and user_stop.requested:
            study.stop()

    callbacks = [*([on_trial] if on_trial is not None else []), stop_when_asked]
    study.optimize(objective, n_trials=trials, timeout=timeout, catch=(FoxhuntError,), callbacks=callbacks)
    return study


@attrs.frozen
class TrialRow:
    """One trial as the tables show it."""

    number: int
    state: str
    value: float | None
    params: dict[str, Any]
    last_step: int | None
    seconds: float | None
    run_dir: str
    error: str | None


def trial_rows(study: optuna.Study) -> list[TrialRow]:
    rows = []
    for trial in study.trials:
        duration = trial.duration.total_seconds() if trial.duration is not None else None
        steps = trial.intermediate_values
        rows.append(TrialRow(
            trial.number, trial.state.name.lower(), trial.value, dict(trial.params),
            max(steps) if steps else None, duration, trial.user_attrs.get("run_dir", ""), trial.user_attrs.get("error"),
        ))
    return rows


def trial_line(trial: Any) -> str:
    """One line saying what became of a finished trial (printed as each trial ends, by any worker)."""
    where = trial.user_attrs.get("run_dir", "")
    if trial.state.name == "COMPLETE":
        return f"trial {trial.number} complete: {trial.value:+.4f}  {where}"
    if trial.state.name == "PRUNED":
        last = max(trial.intermediate_values) if trial.intermediate_values else "-"
        return f"trial {trial.number} pruned at step {last}  {where}"
    state = "failed" if trial.state.name == "FAIL" else trial.state.name.lower()
    return f"trial {trial.number} {state}: {trial.user_attrs.get('error', '')}  {where}"


def trial_record(run_path: Path) -> dict[str, Any]:
    """A trial run directory's ``trial.json``."""
    return json.loads((Path(run_path) / "trial.json").read_text(encoding="utf-8"))
