"""Fixtures for the CLI tests: an in-process runner, and temporary site directories for fake distributions."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import structlog
from click.testing import CliRunner, Result

from foxhunt.cli.main import cli

_spec = importlib.util.spec_from_file_location(
    "foxhunt_test_fake_dists", Path(__file__).resolve().parents[1] / "fixtures" / "fake_dists.py"
)
fake_dists: ModuleType = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_dists)


@pytest.fixture(scope="module")
def _private_feature_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Features are cached under a temporary directory, never the user's home cache; rich tables are not
    wrapped, so names appear whole."""
    cache = tmp_path_factory.mktemp("foxhunt-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FOXHUNT_CACHE_DIR", str(cache))
        patch.setenv("COLUMNS", "240")
        yield cache


@pytest.fixture(autouse=True)
def _restore_logging():
    """The CLI configures structlog globally (to the runner's stderr); put the defaults back afterwards."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def run():
    """Invoke ``foxhunt ARGS...`` in-process; stdout and stderr are kept apart."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), prog_name="foxhunt")

    return invoke


@pytest.fixture
def dists() -> ModuleType:
    """``tests/fixtures/fake_dists.py``: writes real distributions (dist-info + entry points + module)."""
    return fake_dists


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A temporary site directory on sys.path; distributions written there are discovered."""
    root = tmp_path / "site"
    root.mkdir()
    fake_dists.make_visible(monkeypatch, root)
    yield root
    fake_dists.forget_modules(root)
