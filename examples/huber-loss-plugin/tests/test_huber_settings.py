"""The plugin's own [plugins.huber] section, end to end through the foxhunt command line, with no edit to foxhunt:
set in a config file, shown by `foxhunt config show` and `foxhunt plugins inspect`, used by a tiny training run."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from foxhunt.cli.main import cli

# Huber replaces the built-in MSE loss at the same budget, so the budgets still sum to 1.
CONFIG = """
[plugins]
disable = ["mse"]

[plugins.huber]
enabled = true
kappa = 0.5

[learner.budgets]
huber = 0.15
"""
TINY = [
    "--set", "train.epochs=1", "--set", "train.env_steps_per_epoch=80", "--set", "train.updates_per_epoch=10",
    "--set", "train.warmup_env_steps=16", "--set", "folds.n_folds=1", "--set", "folds.train_bars=300",
    "--set", "folds.validation_bars=60", "--set", "folds.test_bars=60", "--set", "folds.embargo_bars=5",
    "--set", "env.n_envs=8", "--set", "learner.hidden=[32,32]", "--set", "learner.head_hidden=16",
    "--set", "learner.batch_size=32", "--set", "learner.n_atoms=11", "--set", "learner.replay.capacity=1024",
    "--set", 'features.feature_set="horizons"',  # warm-up 64: the folds above fit 600 bars
]


def foxhunt(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="foxhunt")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "huber.toml"
    path.write_text(CONFIG)
    return path


def test_config_show_prints_the_section_resolved(config_file: Path):
    result = foxhunt("config", "show", "--config", str(config_file))
    assert result.exit_code == 0, result.output
    assert tomllib.loads(result.stdout)["plugins"]["huber"] == {"enabled": True, "kappa": 0.5}
    defaults = tomllib.loads(foxhunt("config", "show").stdout)["plugins"]["huber"]
    assert defaults == {"enabled": False, "kappa": 1.0}  # shown even when the config says nothing


def test_plugins_inspect_shows_the_settings_and_the_enabled_component(config_file: Path):
    result = foxhunt("plugins", "inspect", "huber", "--config", str(config_file))
    assert result.exit_code == 0, result.output
    assert "huber  foxhunt-huber-loss 0.1.0  (loaded)" in result.stdout
    assert "  settings [plugins.huber]:\n    enabled = true  (default false)\n    kappa = 0.5  (default 1.0)\n" in result.stdout
    assert "components: huber (loss)" in result.stdout


def test_a_misspelt_key_names_this_plugin_its_distribution_and_its_keys():
    result = foxhunt("config", "show", "--set", "plugins.huber.kapa=2")
    assert result.exit_code == 2
    assert ("[huber from foxhunt-huber-loss 0.1.0] plugins.huber.kapa: unknown key; the settings of plugin 'huber' "
            "are enabled, kappa") in result.stderr


def test_a_tiny_run_trains_with_the_section_and_records_it(config_file: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    result = foxhunt("train", "--data", "synthetic:planted?bars=600&seed=2", "--out", str(out), "--no-progress",
                     "--config", str(config_file), *TINY)
    assert result.exit_code == 0, result.output
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["budgets"]["huber"] == 0.15
    assert row["losses"]["huber"] >= 0.0
    assert row["grad_norms"]["huber"] > 0.0
    assert tomllib.loads((out / "config.toml").read_text())["plugins"]["huber"] == {"enabled": True, "kappa": 0.5}
