"""The search space file: parsing, every kind of mistake named by file and key path, the check against
the run config, and what a real Optuna trial draws from it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import optuna
import pytest

from foxhunt.config import load_config
from foxhunt.errors import ConfigError
from foxhunt.tune.space import SearchSpace, check_space, load_space, override_text, parse_space

GOOD = """
[space."learner.lr"]
type = "float"
low = 1e-5
high = 1e-3
log = true

[space."learner.n_step"]
type = "int"
low = 1
high = 5
step = 2

[space."learner.hidden"]
type = "categorical"
choices = [[32, 32], [64, 64]]

[space."train.exploration"]
type = "categorical"
choices = ["epsilon", "boltzmann"]

[pruner]
startup_trials = 2
warmup_steps = 3

[sampler]
startup_trials = 4
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_is_read_whole(tmp_path: Path) -> None:
    space = load_space(write(tmp_path, GOOD))
    assert list(space.space) == ["learner.lr", "learner.n_step", "learner.hidden", "train.exploration"]
    lr = space.space["learner.lr"]
    assert (lr.type, lr.low, lr.high, lr.log) == ("float", 1e-5, 1e-3, True)
    assert space.space["learner.hidden"].choices == ([32, 32], [64, 64])
    assert (space.pruner.startup_trials, space.pruner.warmup_steps, space.sampler.startup_trials) == (2, 3, 4)


def test_the_stored_toml_reads_back_to_the_same_space(tmp_path: Path) -> None:
    space = load_space(write(tmp_path, GOOD))
    assert parse_space(tomllib.loads(space.to_toml()), "stored") == space


@pytest.mark.parametrize(
    ("body", "key_path", "reason"),
    [
        ('[space."learner.lr"]\ntype = "flaot"\nlow = 0.1\nhigh = 1.0', "space['learner.lr'].type", "must be in"),
        ('[space."learner.lr"]\ntype = "float"\nlow = 0.1\nhigh = 1.0\nlo = 3', "space['learner.lr'].lo", "unknown key"),
        ('[space."learner.lr"]\ntype = "float"\nlow = "a"\nhigh = 1.0', "space['learner.lr'].low", "expected a number"),
        ('[space."learner.lr"]\ntype = "float"\nlow = 1.0\nhigh = 0.1', "space['learner.lr'].high", "at least low"),
        ('[space."learner.lr"]\ntype = "float"\nlow = 0.0\nhigh = 0.1\nlog = true', "space['learner.lr'].low", "> 0 on a log"),
        ('[space."learner.lr"]\ntype = "float"\nhigh = 0.1', "space['learner.lr'].low", "required"),
        ('[space."learner.lr"]\ntype = "float"\nlow = 1e-3\nhigh = 0.1\nlog = true\nstep = 0.01',
         "space['learner.lr'].step", "cannot be combined with log"),
        ('[space."learner.n_step"]\ntype = "int"\nlow = 1.5\nhigh = 3', "space['learner.n_step'].low", "must be an integer"),
        ('[space."learner.hidden"]\ntype = "categorical"', "space['learner.hidden'].choices", "at least one value"),
        ('[space."learner.hidden"]\ntype = "categorical"\nchoices = [1, 1]', "space['learner.hidden'].choices", "repeat"),
        ('[space."learner.hidden"]\ntype = "categorical"\nchoices = [1]\nlow = 0',
         "space['learner.hidden'].low", "takes choices"),
        ('[space."learner.lr"]\ntype = "float"\nlow = 0.1\nhigh = 1.0\nchoices = [1]',
         "space['learner.lr'].choices", "takes low and high"),
        ('[space."learner.lr"]\ntype = "float"\nlow = 0.1\nhigh = 1.0\n[prune]\nstartup_trials = 1', "prune", "unknown key"),
        ('[space."learner.lr"]\ntype = "float"\nlow = 0.1\nhigh = 1.0\n[pruner]\nstartup_trials = -1',
         "pruner.startup_trials", ">= 0"),
        ("[space]", "space", "at least one parameter"),
        ("[pruner]\nstartup_trials = 1", "space", "missing"),
    ],
)
def test_each_mistake_is_one_error_naming_file_and_key_path(tmp_path: Path, body: str, key_path: str, reason: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        load_space(path)
    message = str(caught.value)
    assert message.startswith("invalid search space:")
    assert f"{path}: {key_path}: " in message
    assert reason in message


def test_an_unknown_key_hint_points_at_the_space_format_not_the_run_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"a space file holds") as caught:
        load_space(write(tmp_path, '[space."learner.lr"]\ntype = "float"\nlow = 0.1\nhigh = 1.0\n[prune]\nx = 1'))
    assert "foxhunt config show" not in str(caught.value)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[space\n")
    with pytest.raises(ConfigError, match=rf"{path}: not valid TOML"):
        load_space(path)


def space_of(entries: dict) -> SearchSpace:
    return parse_space({"space": entries}, "s.toml")


@pytest.mark.parametrize(
    ("key", "entry", "reason"),
    [
        ("learner.lrr", {"type": "float", "low": 0.1, "high": 1.0}, "learner.lrr is not a config key"),
        ("learner", {"type": "float", "low": 0.1, "high": 1.0}, "learner is not a config key"),
        ("learner.lr.x", {"type": "float", "low": 0.1, "high": 1.0}, "learner.lr.x is not a config key"),
        ("learner..lr", {"type": "float", "low": 0.1, "high": 1.0}, "not a dotted config key"),
        ("folds.n_folds", {"type": "int", "low": 1, "high": 3}, "not tunable: it sets the validation windows"),
        ("data.source", {"type": "categorical", "choices": ["a", "b"]}, "not tunable: it sets the data"),
        ("train.validation_metric", {"type": "categorical", "choices": ["sharpe"]}, "not tunable"),
        ("run.seed", {"type": "int", "low": 0, "high": 9}, "not tunable: it sets how and where a trial runs"),
        ("learner.lr", {"type": "float", "low": -1.0, "high": 1e-3}, "the value -1.0 is refused by the run config"),
        ("learner.n_step", {"type": "categorical", "choices": [1, "two"]}, "the value 'two' is refused"),
    ],
)
def test_keys_and_values_are_checked_against_the_run_config(key: str, entry: dict, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_space(space_of({key: entry}), {}, "s.toml")
    assert f"s.toml: space[{key!r}]: " in str(caught.value)
    assert reason in str(caught.value)


def test_every_problem_of_a_space_is_listed_at_once() -> None:
    space = space_of({"learner.lrr": {"type": "float", "low": 0.1, "high": 1.0},
                      "folds.n_folds": {"type": "int", "low": 1, "high": 3}})
    with pytest.raises(ConfigError) as caught:
        check_space(space, {}, "s.toml")
    assert "learner.lrr" in str(caught.value) and "folds.n_folds" in str(caught.value)


def test_lists_and_free_form_tables_are_tunable() -> None:
    check_space(space_of({
        "learner.hidden": {"type": "categorical", "choices": [[32, 32], [64]]},
        "learner.budgets.c51": {"type": "float", "low": 0.1, "high": 0.5},
    }), {}, "s.toml")


def test_a_plugins_own_setting_is_tunable_and_checked_by_the_plugin() -> None:
    check_space(space_of({"plugins.iqn.kappa": {"type": "float", "low": 0.5, "high": 2.0}}), {}, "s.toml")
    with pytest.raises(ConfigError) as caught:
        check_space(space_of({
            "plugins.iqn.kapa": {"type": "float", "low": 0.5, "high": 2.0},
            "plugins.ensemble.diversity": {"type": "categorical", "choices": [0.5, 1.5]},
        }), {}, "s.toml")
    message = str(caught.value)
    assert "space['plugins.iqn.kapa']: the value 0.5 is refused by its plugin: " in message
    assert "plugins.iqn.kapa: unknown key; the settings of plugin 'iqn' are kappa" in message
    assert "space['plugins.ensemble.diversity']: the value 1.5 is refused by its plugin: " in message
    assert "space['plugins.ensemble.diversity']: the value 0.5" not in message


def test_values_are_checked_on_top_of_the_base_config() -> None:
    # lr is fine alone; it is refused here only because the check structures it over the given base data
    space = space_of({"learner.lr": {"type": "float", "low": 1e-4, "high": 1e-3}})
    with pytest.raises(ConfigError, match="unknown key"):
        check_space(space, {"learner": {"nonsense": 1}}, "s.toml")


def test_a_real_trial_draws_values_inside_the_space_that_load_as_config(tmp_path: Path) -> None:
    space = load_space(write(tmp_path, GOOD))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(8):
        trial = study.ask()
        params = space.suggest(trial)
        assert 1e-5 <= params["learner.lr"] <= 1e-3
        assert params["learner.n_step"] in (1, 3, 5)
        assert params["learner.hidden"] in ([32, 32], [64, 64])
        assert params["train.exploration"] in ("epsilon", "boltzmann")
        config = load_config(None, space.overrides(params))
        assert config.learner.lr == params["learner.lr"]
        assert config.learner.n_step == params["learner.n_step"]
        assert list(config.learner.hidden) == params["learner.hidden"]
        assert config.train.exploration == params["train.exploration"]
        study.tell(trial, 0.0)


@pytest.mark.parametrize(("value", "text"), [(1e-5, "1e-05"), (3, "3"), (True, "true"), ('a"b', '"a\\"b"'),
                                            ([64, 64], "[64, 64]"), ({"c51": 0.5}, '{"c51" = 0.5}')])
def test_override_text_is_one_line_of_toml(value, text) -> None:
    assert override_text(value) == text
    assert tomllib.loads(f"v = {text}")["v"] == value
