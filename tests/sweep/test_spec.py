"""The sweep file: structure errors and config checks name the key; variants expand in file order."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from foxhunt.errors import ConfigError
from foxhunt.sweep.spec import SweepSpec, check_spec, load_spec, parse_spec


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("seeds = 0", r"sweep.toml: seeds: 'seeds' must be at least 1, got 0"),
    ("seeds = 'four'", r"sweep.toml: seeds: "),
    ("folds = [1, 1]", r"sweep.toml: folds: 'folds' must list distinct fold numbers"),
    ("sedes = 3", r"sweep.toml: sedes: "),
    ('[grid]\n"learner.lr" = []', r"sweep.toml: grid: 'grid' key 'learner.lr' must list at least one value"),
    ('[grid]\n"learner.lr" = [1e-4, 1e-4]', r"'grid' key 'learner.lr' must not repeat a value"),
    ('[[variants]]\nname = "a"\n[[variants]]\nname = "a"', r"sweep.toml: variants: 'variants' must have distinct"),
    ('[[variants]]\nset = {}', r"sweep.toml: variants\[0\].name: "),
])
def test_a_malformed_sweep_file_is_one_error_naming_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_spec(write(tmp_path, text))
    assert str(caught.value).startswith("invalid sweep spec:")


@pytest.mark.parametrize(("data", "message"), [
    ({"grid": {"learner.lrr": [1e-4]}}, r"t.toml: grid\['learner.lrr'\]: the value 0.0001 is refused by the run "
                                        r"config: .*learner.lrr"),
    ({"grid": {"learner.lr": [-1.0]}}, r"t.toml: grid\['learner.lr'\]: the value -1.0 is refused by the run config"),
    ({"grid": {"run.seed": [1, 2]}}, r"t.toml: grid\['run.seed'\]: run.seed cannot be swept: the sweep sets"),
    ({"variants": [{"name": "x", "set": {"folds.only": 1}}]},
     r"t.toml: variants\[0\].set\['folds.only'\]: folds.only cannot be swept"),
    ({"folds": [0, 3]}, r"t.toml: folds: \[3\] are not folds of the config's 3 \(folds.n_folds\)"),
])
def test_keys_and_values_are_checked_against_the_base_config(data: dict, message: str, base_config: str) -> None:
    spec = parse_spec(data, "t.toml")
    with pytest.raises(ConfigError, match=message):
        check_spec(spec, tomllib.loads(base_config), "t.toml")


def test_a_good_spec_passes_the_checks(base_config: str) -> None:
    spec = parse_spec({"grid": {"learner.lr": [1e-4, 3e-4]}, "folds": [0, 2]}, "t.toml")
    check_spec(spec, tomllib.loads(base_config), "t.toml")


def test_variants_are_each_named_set_with_each_grid_point_in_file_order() -> None:
    spec = parse_spec({
        "grid": {"learner.lr": [1e-4, 3e-4], "learner.n_step": [1, 3]},
        "variants": [{"name": "narrow", "set": {"learner.hidden": [16, 16]}}, {"name": "plain"}],
    }, "t.toml")
    variants = spec.variants_overrides()
    assert len(variants) == 8
    assert variants[0] == ("narrow learner.lr=0.0001 learner.n_step=1",
                           ["learner.hidden=[16, 16]", "learner.lr=0.0001", "learner.n_step=1"])
    assert variants[3][0] == "narrow learner.lr=0.0003 learner.n_step=3"
    assert variants[4] == ("plain learner.lr=0.0001 learner.n_step=1", ["learner.lr=0.0001", "learner.n_step=1"])


def test_without_grid_or_variants_there_is_one_variant_the_base_config() -> None:
    assert SweepSpec().variants_overrides() == [("base", [])]
    assert SweepSpec(seeds=3, first_seed=5).seed_list == [5, 6, 7]
