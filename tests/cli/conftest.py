"""Fixtures for the CLI tests: an in-process runner, and temporary site directories for fake distributions."""

from __future__ import annotations

import importlib.util
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
