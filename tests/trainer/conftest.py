"""Fixtures for the trainer tests: a private feature cache and reference runs built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_testkit import LIVE, _private_feature_cache, invoke, train_args  # noqa: F401 - a fixture


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    """An uninterrupted tiny run through the CLI: the result every other run of the same config must match."""
    out = tmp_path_factory.mktemp("reference") / "run"
    result = invoke(*train_args(out))
    assert result.exit_code == 0, result.output + result.stderr
    return out


@pytest.fixture(scope="session")
def live_reference_run(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    """An uninterrupted run of the :data:`LIVE` config, in-process."""
    out = tmp_path_factory.mktemp("live-reference") / "run"
    result = invoke(*train_args(out, LIVE))
    assert result.exit_code == 0, result.output + result.stderr
    return out
