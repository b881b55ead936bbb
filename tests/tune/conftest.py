"""Fixtures for the tune tests: a private feature cache, and the tiny run config of the trainer tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import structlog

_spec = importlib.util.spec_from_file_location(
    "foxhunt_tune_trainer_testkit", Path(__file__).resolve().parents[1] / "trainer" / "trainer_testkit.py"
)
kit: ModuleType = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kit)


@pytest.fixture(scope="session", autouse=True)
def _private_feature_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Features are cached under a temporary directory, never the user's home cache."""
    cache = tmp_path_factory.mktemp("foxhunt-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FOXHUNT_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def testkit() -> ModuleType:
    """``tests/trainer/trainer_testkit.py``: the tiny config (``TINY``, ``TINY_DATA``) and CLI helpers."""
    return kit
