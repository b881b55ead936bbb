"""Real tiny studies: trials are ordinary runs, persisted in SQLite, resumed, pruned and interrupted cleanly.

Each trial trains the trainer tests' tiny config (2 folds x 2 epochs of 12 steps on an 800-bar planted
market), so a trial takes seconds once numba has compiled the kernels in this process.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import attrs
import optuna
import pytest

from foxhunt.errors import ConfigError
from foxhunt.trainer.interrupt import StopFlag
from foxhunt.tune.study import (
    StudySpec, default_storage, load_study, prepare_study, run_study, run_trial, trial_record,
)
from foxhunt.tune.space import PrunerSettings, load_space

SPACE = """
[space."learner.lr"]
type = "float"
low = 1e-4
high = 3e-3
log = true

[space."learner.hidden"]
type = "categorical"
choices = [[16, 16], [32, 32]]

[sampler]
startup_trials = 2
"""
NO_PRUNING = optuna.pruners.NopPruner()
TrialState = optuna.trial.TrialState


def base_overrides(kit: ModuleType) -> list[str]:
    return [*kit.TINY, f'data.source="{kit.TINY_DATA}"', 'run.device="cpu"']


def new_spec(tmp_path: Path, kit: ModuleType, name: str = "tiny") -> StudySpec:
    space = tmp_path / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    directory = tmp_path / "study"
    return prepare_study(name, directory, default_storage(directory), space_path=space, overrides=base_overrides(kit))


def fold_bests(run_dir: Path) -> dict[int, float]:
    """Each fold's best validation Sharpe, read back from the run's own metrics.jsonl."""
    best: dict[int, float] = {}
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        best[row["fold"]] = max(best.get(row["fold"], -float("inf")), row["validation"]["sharpe"])
    return best


def test_a_study_persists_its_trials_as_runs_and_resumes(tmp_path: Path, testkit: ModuleType) -> None:
    spec = new_spec(tmp_path, testkit)
    study = run_study(spec, trials=2, seed=7, pruner=NO_PRUNING)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert (tmp_path / "study" / "study.db").is_file()
    for trial in study.trials:
        run_dir = Path(trial.user_attrs["run_dir"])
        assert run_dir == tmp_path / "study" / f"trial_{trial.number:04d}"
        assert (run_dir / "summary.json").is_file()
        record = trial_record(run_dir)
        assert record["state"] == "complete"
        assert record["params"]["learner.lr"] == trial.params["learner.lr"]
        assert record["overrides"][0] == f"learner.lr={trial.params['learner.lr']!r}"
        config_text = (run_dir / "config.toml").read_text(encoding="utf-8")
        assert f"lr = {trial.params['learner.lr']!r}" in config_text
        bests = fold_bests(run_dir)
        assert trial.value == pytest.approx(sum(bests.values()) / len(bests))
        assert sorted(trial.intermediate_values) == [0, 1, 2, 3]  # fold * epochs + epoch

    # A new process would see the same: the stored study gives back its base config and space.
    resumed = prepare_study("tiny", tmp_path / "study", spec.storage)
    assert resumed == spec
    study = run_study(resumed, trials=1, seed=7, pruner=NO_PRUNING)
    assert [t.number for t in study.trials] == [0, 1, 2]
    assert study.trials[2].state is TrialState.COMPLETE
    # the resumed sampler's seed is offset by the stored trials, so it does not redraw trial 0's values
    assert study.trials[2].params["learner.lr"] != study.trials[0].params["learner.lr"]

    shown = load_study("tiny", spec.storage)
    assert len(shown.trials) == 3
    best = shown.best_trial
    assert best.value == max(t.value for t in shown.trials)
    assert 1e-4 <= best.params["learner.lr"] <= 3e-3
    assert best.params["learner.hidden"] in ("[16, 16]", "[32, 32]")
    assert load_space(tmp_path / "study" / "space.toml") == spec.space
    assert (tmp_path / "study" / "base.toml").read_text(encoding="utf-8") == spec.base_config


def test_a_retried_folds_epochs_are_reported_at_steps_of_their_own(tmp_path: Path, testkit: ModuleType) -> None:
    # [train] flat_fold_retries = 1: a fold may train 2 + 2 epochs, so steps count 4 per fold and never repeat
    space = tmp_path / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    directory = tmp_path / "study"
    spec = prepare_study("retries", directory, default_storage(directory), space_path=space,
                         overrides=[*base_overrides(testkit), "train.flat_fold_retries=1"])
    trial = run_study(spec, trials=1, seed=7, pruner=NO_PRUNING).trials[0]
    lines = (Path(trial.user_attrs["run_dir"]) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert any("flat_fold_retry" in row for row in rows)  # the tiny run's first fold ends flat on validation
    assert sorted(trial.intermediate_values) == sorted(row["fold"] * 4 + row["epoch"] for row in rows)
    assert len(trial.intermediate_values) == len(rows)


def test_a_pruned_trial_closes_its_run_cleanly(tmp_path: Path, testkit: ModuleType) -> None:
    spec = new_spec(tmp_path, testkit)
    # No Sharpe reaches 1e9: the pruner stops the trial at its first report, after fold 0's first epoch.
    study = run_study(spec, trials=1, pruner=optuna.pruners.ThresholdPruner(lower=1e9))
    trial = study.trials[0]
    assert trial.state is TrialState.PRUNED
    assert list(trial.intermediate_values) == [0]
    run_dir = Path(trial.user_attrs["run_dir"])
    assert trial_record(run_dir)["state"] == "pruned"
    assert trial_record(run_dir)["step"] == 0
    assert len((run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()) == 1
    assert (run_dir / "checkpoints" / "resume").is_dir()  # stopped at a safe point, resumable like a Ctrl-C
    assert (run_dir / "checkpoints" / "fold_0").is_dir()
    assert not (run_dir / "summary.json").exists()


def lifted_study(spec: StudySpec) -> None:
    """The study's storage with one finished trial that reported 1e9 at every step: a median that no real
    trial of the tiny config reaches at step 0."""
    spec.directory.mkdir(parents=True)
    study = optuna.create_study(study_name=spec.name, storage=spec.storage, direction="maximize")
    distributions = {
        "learner.lr": optuna.distributions.FloatDistribution(1e-4, 3e-3, log=True),
        "learner.hidden": optuna.distributions.CategoricalDistribution(["[16, 16]", "[32, 32]"]),
    }
    study.add_trial(optuna.trial.create_trial(
        params={"learner.lr": 1e-3, "learner.hidden": "[16, 16]"}, distributions=distributions, value=1e9,
        intermediate_values={step: 1e9 for step in range(4)},
    ))


@pytest.mark.parametrize(("startup_trials", "expected"), [(1, TrialState.PRUNED), (2, TrialState.COMPLETE)])
def test_the_space_files_median_pruner_prunes_a_trial_below_the_median(
    tmp_path: Path, testkit: ModuleType, startup_trials: int, expected: TrialState
) -> None:
    spec = new_spec(tmp_path, testkit)
    spec = attrs.evolve(spec, space=attrs.evolve(spec.space, pruner=PrunerSettings(startup_trials=startup_trials)))
    lifted_study(spec)
    study = run_study(spec, trials=1)  # no pruner given: the median pruner of the space file
    trial = study.trials[1]
    assert trial.state is expected  # below the median, pruned once enough trials have finished
    record = trial_record(Path(trial.user_attrs["run_dir"]))
    if expected is TrialState.PRUNED:
        assert list(trial.intermediate_values) == [0]
        assert record["state"] == "pruned"
    else:
        assert sorted(trial.intermediate_values) == [0, 1, 2, 3]
        assert record["state"] == "complete"


def test_a_trial_runs_outside_optimize_through_ask_and_tell(tmp_path: Path, testkit: ModuleType) -> None:
    """What an executor (another process reaching the same storage) does with one trial."""
    spec = new_spec(tmp_path, testkit)
    spec.directory.mkdir(parents=True)
    study = optuna.create_study(study_name=spec.name, storage=spec.storage, direction=spec.direction)
    trial = study.ask()
    value = run_trial(spec, trial)
    study.tell(trial, value)
    frozen = load_study(spec.name, spec.storage).trials[0]
    assert frozen.state is TrialState.COMPLETE and frozen.value == value
    bests = fold_bests(spec.directory / "trial_0000")
    assert value == pytest.approx(sum(bests.values()) / len(bests))


class RequestedStop:
    requested = True


def test_ctrl_c_ends_the_trial_at_an_epoch_boundary_and_the_study(tmp_path: Path, testkit: ModuleType) -> None:
    spec = new_spec(tmp_path, testkit)
    study = run_study(spec, trials=3, pruner=NO_PRUNING, user_stop=RequestedStop())
    assert len(study.trials) == 1
    trial = study.trials[0]
    assert trial.state is TrialState.FAIL
    assert "interrupted at step 0" in trial.user_attrs["error"]
    assert trial_record(Path(trial.user_attrs["run_dir"]))["state"] == "interrupted"


def test_ctrl_c_between_trials_starts_no_new_trial(tmp_path: Path, testkit: ModuleType) -> None:
    spec = new_spec(tmp_path, testkit)
    user_stop = StopFlag()

    def press_ctrl_c_after_the_first(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        user_stop.request("test: after the first trial")

    study = run_study(spec, trials=3, pruner=NO_PRUNING, user_stop=user_stop, on_trial=press_ctrl_c_after_the_first)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE]


def test_a_trial_that_fails_is_recorded_with_its_error_and_the_study_goes_on(tmp_path: Path, testkit: ModuleType) -> None:
    space = tmp_path / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    directory = tmp_path / "study"
    overrides = [*base_overrides(testkit), 'data.source="missing-file.csv"']
    spec = prepare_study("broken", directory, default_storage(directory), space_path=space, overrides=overrides)
    study = run_study(spec, trials=2, pruner=NO_PRUNING)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.FAIL]
    assert "missing-file.csv" in study.trials[0].user_attrs["error"]
    record = trial_record(directory / "trial_0000")
    assert record["state"] == "failed" and "missing-file.csv" in record["error"]


def test_resuming_with_another_setup_is_refused(tmp_path: Path, testkit: ModuleType) -> None:
    spec = new_spec(tmp_path, testkit)
    run_study(spec, trials=1, pruner=NO_PRUNING)
    with pytest.raises(ConfigError, match=r"(?s)another base config.*learner\.lr: [0-9.e-]+ in the study, 0\.001 now"):
        prepare_study("tiny", spec.directory, spec.storage, overrides=[*base_overrides(testkit), "learner.lr=1e-3"])
    other_space = tmp_path / "other.toml"
    other_space.write_text(SPACE.replace("high = 3e-3", "high = 1e-2"), encoding="utf-8")
    with pytest.raises(ConfigError, match="another search space"):
        prepare_study("tiny", spec.directory, spec.storage, space_path=other_space)
    # the same command again is a resume, not a conflict
    assert prepare_study("tiny", spec.directory, spec.storage, space_path=tmp_path / "space.toml",
                         overrides=base_overrides(testkit)) == spec


def test_a_new_study_needs_a_space_and_an_empty_directory(tmp_path: Path, testkit: ModuleType) -> None:
    directory = tmp_path / "study"
    with pytest.raises(ConfigError, match="does not exist yet.*--space"):
        prepare_study("fresh", directory, default_storage(directory))
    assert not directory.exists()  # a refused start leaves nothing behind
    (directory / "trial_0000").mkdir(parents=True)
    space = tmp_path / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    with pytest.raises(ConfigError, match="already holds trial runs"):
        prepare_study("fresh", directory, default_storage(directory), space_path=space)


def test_a_study_over_several_sources_trains_each_trial_on_each_and_averages(
    tmp_path: Path, testkit: ModuleType
) -> None:
    other = "synthetic:planted?bars=800&seed=4"
    space = tmp_path / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    directory = tmp_path / "study"
    spec = prepare_study("suite", directory, default_storage(directory), space_path=space,
                         overrides=[*testkit.TINY, 'run.device="cpu"'], sources=[testkit.TINY_DATA, other])
    assert spec.sources == (testkit.TINY_DATA, other)
    assert spec.base.data.source == testkit.TINY_DATA  # the first source is the base config's
    study = run_study(spec, trials=1, seed=2, pruner=NO_PRUNING)
    (trial,) = study.trials
    assert trial.state is TrialState.COMPLETE
    trial_dir = directory / "trial_0000"
    objectives = []
    for index, source in enumerate((testkit.TINY_DATA, other)):
        run_dir = trial_dir / f"data_{index}"
        assert f'source = "{source}"' in (run_dir / "config.toml").read_text(encoding="utf-8")
        bests = fold_bests(run_dir)
        objectives.append(sum(bests.values()) / len(bests))
    record = trial_record(trial_dir)
    assert record["sources"] == [testkit.TINY_DATA, other]
    assert record["source_objectives"] == pytest.approx(objectives)
    assert trial.value == pytest.approx(sum(objectives) / 2)
    # 2 folds x 2 epochs per source: the second source reports after the first's steps, never over them
    assert sorted(trial.intermediate_values) == list(range(8))

    # a resume without --data keeps both sources; another list is refused, naming both
    resumed = prepare_study("suite", directory, default_storage(directory))
    assert resumed.sources == spec.sources
    with pytest.raises(ConfigError, match="started with data"):
        prepare_study("suite", directory, default_storage(directory), sources=[other, testkit.TINY_DATA])


def test_a_source_given_twice_is_refused(tmp_path: Path, testkit: ModuleType) -> None:
    space = tmp_path / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    directory = tmp_path / "study"
    with pytest.raises(ConfigError, match="more than once"):
        prepare_study("twice", directory, default_storage(directory), space_path=space,
                      overrides=[*testkit.TINY, 'run.device="cpu"'], sources=[testkit.TINY_DATA, testkit.TINY_DATA])
