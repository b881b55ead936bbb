"""What CI checks over the whole tree, beyond the unit tests: every hook on every file, the audit, the import contracts.

The files are those git knows about: tracked, plus untracked files that are not
ignored (in CI, where everything is committed, that is exactly ``git ls-files``;
locally it also covers work not yet staged, which is what is about to be committed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The project's environment first on PATH: the registry hook runs the `foxhunt` command it finds there.
ENV = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def repository_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the repository checks need git and a git checkout of foxhunt")
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout.decode("utf-8")
    return sorted(path for path in listing.split("\0") if path and (ROOT / path).is_file())


def is_text(path: str) -> bool:
    data = (ROOT / path).read_bytes()
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def run_hook(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"hooks.{module}", *args], cwd=ROOT, capture_output=True,
                          text=True, env=ENV)


FILES = repository_files()
PYTHON = [f for f in FILES if f.endswith(".py")]


@pytest.mark.parametrize(
    ("hook", "files"),
    [
        ("no_deferred_work", ["--whole-file", *[f for f in FILES if is_text(f)]]),
        ("audited_components", [f for f in FILES if f.endswith((".py", "pyproject.toml"))
                                or (f.startswith("docs/audits/") and f.endswith(".md"))]),
        ("no_layout_migration", PYTHON),
        ("named_dimensions", PYTHON),
        ("registry_snapshot", []),
    ],
    ids=["no-deferred-work-whole-file", "audited-components", "no-layout-migration", "named-dimensions",
         "registry-snapshot"],
)
def test_hook_passes_over_the_whole_tree(hook, files):
    result = run_hook(hook, *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_audit_check_passes():
    command = "from foxhunt.cli.audit_commands import audit_group; audit_group(['check'], prog_name='foxhunt audit')"
    result = subprocess.run([sys.executable, "-c", command], cwd=ROOT, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contracts_are_kept():
    command = shutil.which("lint-imports", path=ENV["PATH"])
    if command is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]'")
    result = subprocess.run([command], cwd=ROOT, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stdout + result.stderr
