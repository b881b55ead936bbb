"""A small market for the Gymnasium env tests: 2 000 synthetic bars, one fold, short episodes, no feature cache."""

from __future__ import annotations

import pytest

SOURCE = "synthetic:ar1?bars=2000&seed=1"
OVERRIDES = (
    "features.cache=false",
    "folds.n_folds=1",
    "folds.train_bars=1000",
    "folds.validation_bars=200",
    "folds.test_bars=200",
    "env.episode_bars=40",
)


@pytest.fixture(scope="session")
def source() -> str:
    return SOURCE


@pytest.fixture(scope="session")
def overrides() -> tuple[str, ...]:
    return OVERRIDES
