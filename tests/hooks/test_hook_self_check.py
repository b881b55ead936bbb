"""The hook programs, their tests and their docs pass the hooks themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
OWN_FILES = sorted(
    [
        *(REPO_ROOT / "hooks").glob("*.py"),
        *(REPO_ROOT / "tests" / "hooks").glob("*.py"),
        REPO_ROOT / "docs" / "hooks.md",
        REPO_ROOT / ".pre-commit-hooks.yaml",
        REPO_ROOT / ".pre-commit-config.yaml",
    ]
)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("no_deferred_work", ["--whole-file"]),
        ("audited_components", []),
        ("no_layout_migration", []),
        ("named_dimensions", []),
    ],
)
def test_own_files_pass(hook_modules, capsys, name, args):
    assert hook_modules[name].main([*args, *map(str, OWN_FILES)]) == 0
    assert capsys.readouterr().out == ""
