"""Shared pieces of the trainer tests: the tiny run config and ways to run ``foxhunt``.

numba compiles the kernels once per process (tens of seconds on 2 cores), so runs
happen in-process wherever a subprocess is not the point of the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog
from click.testing import CliRunner, Result

from foxhunt.cli.main import cli

# A planted market and a fold layout that fits it: warm-up + 300 train + 5 embargo + 80 validation + 5 embargo
# + 2 x 80 test < 800. The `horizons` inputs (warm-up 64): the CPU profile's `horizons512` needs 512 bars of it.
TINY_DATA = "synthetic:planted?bars=800&seed=3"
TINY = (
    "train.epochs=2", "train.env_steps_per_epoch=96", "train.updates_per_epoch=12", "train.warmup_env_steps=32",
    "folds.n_folds=2", "folds.train_bars=300", "folds.validation_bars=80", "folds.test_bars=80", "folds.embargo_bars=5",
    "env.n_envs=8", "learner.hidden=[32,32]", "learner.head_hidden=16", "learner.batch_size=32",
    "learner.n_atoms=11", "learner.replay.capacity=2048",
    "plugins.c51.label_smoothing_max=0.1",  # its default: a plugin table in every saved config, resumed and backtested
    'features.feature_set="horizons"',
)
# The same run, long enough (2 folds x 12 epochs) that a live process can be scraped and interrupted mid-run.
LIVE = (*TINY, "train.epochs=12")


class StopAfter:
    """A stop request that turns on once ``lines`` epochs have written their metrics line."""

    def __init__(self, run_dir: Path, lines: int) -> None:
        self.metrics = run_dir / "metrics.jsonl"
        self.lines = lines

    @property
    def requested(self) -> bool:
        if not self.metrics.exists():
            return False
        return len(self.metrics.read_text(encoding="utf-8").splitlines()) >= self.lines


@pytest.fixture(scope="session", autouse=True)
def _private_feature_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Features are cached under a temporary directory, never the user's home cache."""
    cache = tmp_path_factory.mktemp("foxhunt-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FOXHUNT_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    """One tiny run in this process: the kernels it compiles are then loaded from the private cache
    (``FOXHUNT_CACHE_DIR``, inherited) by every child process and Ray worker, so none compiles them again."""
    out = tmp_path_factory.mktemp("warm") / "run"
    result = invoke(*train_args(out, (*TINY, "train.epochs=1", "folds.n_folds=1")))
    assert result.exit_code == 0, result.output + result.stderr
    return _private_feature_cache


def set_args(overrides: Sequence[str]) -> list[str]:
    """``--set KEY=VALUE`` for every override."""
    return [arg for override in overrides for arg in ("--set", override)]


def train_args(out: Path, overrides: Sequence[str] = TINY, data: str = TINY_DATA) -> list[str]:
    return ["train", "--data", data, *set_args(overrides), "--out", str(out), "--device", "cpu", "--no-progress"]


def invoke(*args: str) -> Result:
    """``foxhunt ARGS...`` in-process (stdout and stderr apart); logging defaults restored afterwards."""
    try:
        return CliRunner().invoke(cli, list(args), prog_name="foxhunt")
    finally:
        structlog.reset_defaults()


def tiny_trainer_config(*extra: str) -> Any:
    """The tiny run's config on the CPU, as ``Trainer`` takes it, with ``extra`` overrides."""
    from foxhunt.config import load_config

    return load_config(None, [*TINY, f'data.source="{TINY_DATA}"', 'run.device="cpu"', *extra])


def metric_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every row of a run's ``metrics.jsonl``."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def network_copy(trainer: Any) -> dict[str, Any]:
    """A copy of the learner's online network, tensor by name."""
    return {name: value.detach().clone() for name, value in trainer.learner.network.state_dict().items()}


def record_fold_starts(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Patch ``Trainer._fold_boundary`` to record the network each fold boundary starts from (before it resets the
    fold's state); returns the list the copies are appended to."""
    from foxhunt.trainer.trainer import Trainer

    starts: list[dict[str, Any]] = []
    fold_boundary = Trainer._fold_boundary

    def recording_fold_boundary(trainer: Trainer) -> None:
        starts.append(network_copy(trainer))
        fold_boundary(trainer)

    monkeypatch.setattr(Trainer, "_fold_boundary", recording_fold_boundary)
    return starts


def read_summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


def foxhunt_process(args: Sequence[str], log_dir: Path, env: dict[str, str]) -> subprocess.Popen:
    """``foxhunt ARGS...`` as a child process; output goes to files so a full pipe can never block it."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-c", "from foxhunt.cli.main import main; main()", "--json-logs", *args],
        stdout=open(log_dir / "stdout.txt", "wb"), stderr=open(log_dir / "stderr.txt", "wb"), env=env,
    )


def record_entered_folds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch ``Trainer.enter_fold`` to record the index of each fold whose data it prepares; returns that list."""
    from foxhunt.trainer.trainer import Trainer

    entered: list[int] = []
    enter_fold = Trainer.enter_fold

    def recording_enter_fold(trainer: Trainer, fold: Any) -> None:
        entered.append(fold.index)
        enter_fold(trainer, fold)

    monkeypatch.setattr(Trainer, "enter_fold", recording_enter_fold)
    return entered
