"""Fixtures for the tune tests: a private feature cache, and the tiny run config of the trainer tests."""

from __future__ import annotations

from types import ModuleType

import pytest
import structlog

import trainer_testkit as kit
from trainer_testkit import _private_feature_cache, warm_cache  # noqa: F401 - shared fixtures


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def testkit() -> ModuleType:
    """``tests/trainer_testkit.py``: the tiny config (``TINY``, ``TINY_DATA``) and CLI helpers."""
    return kit
