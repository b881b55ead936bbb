"""Fixtures for the hook tests: the hook modules, and throwaway git repositories.

The hook programs live in ``hooks/`` at the repository root and are not
installed, so they are loaded from their files under names of their own
(``foxhunt_hook_<name>``): importing them as ``hooks.<name>`` would depend on
the working directory and could clash with this test folder's own name.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HOOKS_DIR = REPO_ROOT / "hooks"
HOOK_NAMES = ("no_deferred_work", "audited_components", "no_layout_migration", "named_dimensions", "registry_snapshot")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"foxhunt_hook_{name}", HOOKS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def hook_modules() -> dict[str, ModuleType]:
    return {name: _load(name) for name in HOOK_NAMES}


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment in which git and pre-commit see only what the test sets up.

    GIT_* variables are dropped (the tests may themselves run inside a git hook,
    which sets GIT_INDEX_FILE and friends), the user's global git config is
    ignored, pre-commit caches into the test's folder, and this interpreter's
    folder comes first on PATH so ``python`` and ``python3`` are this Python.
    The same environment is applied to os.environ for hooks called in-process.
    """
    for key in list(os.environ):
        if key.startswith("GIT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pre-commit-home"))
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return dict(os.environ)


class Repo:
    """A git repository in a temporary folder."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        root.mkdir(parents=True)
        self.git("init", "-q")
        self.git("config", "user.name", "Hook Test")
        self.git("config", "user.email", "hooks@example.invalid")
        self.git("config", "commit.gpgsign", "false")

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=self.root, env=self.env, capture_output=True, text=True)

    def git(self, *args: str) -> str:
        result = self.run("git", *args)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def commit_all(self, message: str = "base", *extra: str) -> subprocess.CompletedProcess[str]:
        self.git("add", "-A")
        return self.run("git", "commit", "-q", "-m", message, *extra)

    def pre_commit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "pre_commit", *args)


@pytest.fixture
def make_repo(tmp_path: Path, git_env: dict[str, str]):
    """Make a git repository in a folder of the test's temporary directory."""
    return lambda name: Repo(tmp_path / name, git_env)


@pytest.fixture
def repo(make_repo) -> Repo:
    return make_repo("repo")
