"""The smallest `foxhunt train` that trains, saves and backtests one fold: shared by the tests that run the CLI.

``TINY_RUN`` is a list of ``--set`` arguments; :func:`train_tiny` runs ``foxhunt train`` with them (and any
more) on a 600-bar planted market into ``tmp_path / "run"``, with a private feature cache.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TINY_RUN", "TINY_DATA", "train_tiny"]

TINY_DATA = "synthetic:planted?bars=600&seed=2"
TINY_RUN = [
    "--set", "train.epochs=1", "--set", "train.env_steps_per_epoch=80", "--set", "train.updates_per_epoch=10",
    "--set", "train.warmup_env_steps=16", "--set", "folds.n_folds=1", "--set", "folds.train_bars=300",
    "--set", "folds.validation_bars=60", "--set", "folds.test_bars=60", "--set", "folds.embargo_bars=5",
    "--set", "env.n_envs=8", "--set", "learner.hidden=[32,32]", "--set", "learner.head_hidden=16",
    "--set", "learner.batch_size=32", "--set", "learner.n_atoms=11", "--set", "learner.replay.capacity=1024",
    "--set", 'features.feature_set="horizons"',  # warm-up 64: 600 bars fit the folds above
]


def train_tiny(tmp_path: Path, monkeypatch, *overrides: str) -> Path:
    """Run the tiny `foxhunt train` with ``overrides`` (more ``--set`` arguments, after ``TINY_RUN``); assert it
    exits 0 (the output is the failure message) and return the run directory."""
    from click.testing import CliRunner

    from foxhunt.cli.main import cli

    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["train", "--data", TINY_DATA, "--out", str(out), "--no-progress", *TINY_RUN,
                                      *overrides], prog_name="foxhunt")
    assert result.exit_code == 0, result.output
    return out
