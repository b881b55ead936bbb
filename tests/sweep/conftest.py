"""Fixtures for the sweep tests: a private feature and kernel cache, warmed once, and a tiny sweep base config.

Trials run as processes of their own, which find the CPU launchers numba compiled in the cache
(``FOXHUNT_CACHE_DIR``, inherited by every trial process and Ray worker); one tiny in-process run fills
that cache first, so no trial pays tens of seconds of compilation.
"""

from __future__ import annotations

import pytest
import structlog

from trainer_testkit import _private_feature_cache, warm_cache  # noqa: F401 - shared fixtures
from foxhunt.config import dump_config, load_config
from sweep_testkit import SWEEP_TINY


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def base_config() -> str:
    """The resolved base config of the tiny sweeps, as TOML (what a sweep stores in plan.json)."""
    return dump_config(load_config(None, SWEEP_TINY))
