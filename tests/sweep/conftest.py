"""Fixtures for the sweep tests: a private feature and kernel cache, warmed once, and a tiny sweep base config.

Trials run as processes of their own, which find the CPU launchers numba compiled in the cache
(``FOXHUNT_CACHE_DIR``, inherited by every trial process and Ray worker); one tiny in-process run fills
that cache first, so no trial pays tens of seconds of compilation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

import trainer_testkit as kit
from trainer_testkit import _private_feature_cache  # noqa: F401 - a fixture, shared with tests/trainer
from foxhunt.config import dump_config, load_config
from sweep_testkit import SWEEP_TINY


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:  # noqa: F811
    """One tiny run in this process: the kernels it compiles are then loaded from the cache by every trial."""
    out = tmp_path_factory.mktemp("warm") / "run"
    result = kit.invoke(*kit.train_args(out, (*kit.TINY, "train.epochs=1", "folds.n_folds=1")))
    assert result.exit_code == 0, result.output + result.stderr
    return _private_feature_cache


@pytest.fixture
def base_config() -> str:
    """The resolved base config of the tiny sweeps, as TOML (what a sweep stores in plan.json)."""
    return dump_config(load_config(None, SWEEP_TINY))
