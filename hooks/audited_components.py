#!/usr/bin/env python3
"""Reject components that have no row in docs/audits/ (invariant 6, docs/invariants.md).

Components are found statically, without importing anything:

* loss components, gradient combiners, encoders and kernels: calls
  ``LossComponent(name="...")``, ``GradientCombiner(name="...")`` and
  ``Kernel(name="...")`` (also as ``records.LossComponent(...)``, and with the
  name as the first positional argument);
* monitors: classes that subclass ``AdaptiveMonitor`` directly and set a class
  attribute ``name = "..."``;
* plugins: the entry points of ``[project.entry-points."foxhunt.plugins"]`` in
  a ``pyproject.toml``.

A component is audited when a markdown table row in ``docs/audits/*.md`` has
the component's name in backticks as its first cell::

    | `c51` | loss | foxhunt_plugins.losses.c51 | wired | tests/builtin_plugins/test_c51.py |

The ``docs/audits/`` folders searched are those of every directory from the
file's own up to the repository root, so an example plugin kept inside the
repository may carry its own audit table. Test files are skipped: the fake
components tests build are not part of any run. Names that are not string
literals cannot be known statically; ``foxhunt audit check`` covers them at
run time.

When an audit table itself is among the files (a row removed or renamed), every
Python file and pyproject.toml tracked by git is checked, so the removal cannot
orphan a component silently.

Usage: python hooks/audited_components.py FILES...
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

# Record classes whose ``name`` is a component name, and the kind each one is.
RECORD_KINDS = {"LossComponent": "loss", "GradientCombiner": "combiner", "Encoder": "encoder",
                "ReplayAugmentation": "augmentation", "Kernel": "kernel"}
MONITOR_BASE = "AdaptiveMonitor"
ENTRY_POINT_GROUP = "foxhunt.plugins"

ROW_RE = re.compile(r"^\s*\|\s*`([^`]+)`\s*\|")


class Component(NamedTuple):
    line: int
    name: str
    kind: str


def is_test_file(path: str) -> bool:
    parts = Path(path).parts
    name = parts[-1]
    return (
        "tests" in parts[:-1]
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def _simple_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _string(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def components_in_python(tree: ast.AST) -> list[Component]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _simple_name(node.func) in RECORD_KINDS:
            kind = RECORD_KINDS[_simple_name(node.func)]
            name_node = next((k.value for k in node.keywords if k.arg == "name"), None)
            if name_node is None and node.args:
                name_node = node.args[0]
            name = _string(name_node)
            if name is not None:
                found.append(Component(name_node.lineno, name, kind))
        elif isinstance(node, ast.ClassDef) and any(_simple_name(b) == MONITOR_BASE for b in node.bases):
            for statement in node.body:
                if isinstance(statement, ast.Assign):
                    targets = statement.targets
                elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    targets = [statement.target]
                else:
                    continue
                name = _string(statement.value)
                if name is not None and any(isinstance(t, ast.Name) and t.id == "name" for t in targets):
                    found.append(Component(statement.lineno, name, "monitor"))
    return found


def components_in_pyproject(text: str) -> list[Component]:
    data = tomllib.loads(text)
    names = data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    lines = text.split("\n")
    # tomllib gives no line numbers: point at the key's line, looking after the group's header first.
    header = next((i for i, line in enumerate(lines) if ENTRY_POINT_GROUP in line and line.lstrip().startswith("[")), 0)
    found = []
    for name in names:
        key = re.compile(r"""^\s*["']?""" + re.escape(name) + r"""["']?\s*=""")
        index = next((i for i in range(header, len(lines)) if key.match(lines[i])), header)
        found.append(Component(index + 1, name, "plugin"))
    return found


def audit_dirs(path: str) -> list[Path]:
    """Every docs/audits/ folder from the file's directory up to the repository root."""
    found = []
    directory = Path(os.path.abspath(path)).parent
    for candidate in (directory, *directory.parents):
        if (candidate / "docs" / "audits").is_dir():
            found.append(candidate / "docs" / "audits")
        if (candidate / ".git").exists():
            break
    return found


def audited_names(directory: Path) -> set[str]:
    names = set()
    for table in sorted(directory.glob("*.md")):
        for line in table.read_text(encoding="utf-8", errors="replace").split("\n"):
            if match := ROW_RE.match(line):
                names.add(match.group(1).strip())
    return names


def tracked_component_files() -> list[str]:
    """Python files and pyproject.toml files tracked by git, relative to the working directory."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return []
    paths = listing.decode("utf-8", errors="replace").split("\0")
    return [p for p in paths if (p.endswith(".py") or Path(p).name == "pyproject.toml") and os.path.isfile(p)]


def is_audit_table(path: str) -> bool:
    parts = Path(path).parts
    return path.endswith(".md") and len(parts) >= 3 and parts[-3:-1] == ("docs", "audits")


def check_file(path: str, audits_cache: dict[Path, set[str]]) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    if Path(path).name == "pyproject.toml":
        try:
            components = components_in_pyproject(text)
        except tomllib.TOMLDecodeError as error:
            return [f"{path}:1: cannot parse ({error}), so its plugin entry points cannot be checked"]
    else:
        try:
            components = components_in_python(ast.parse(text, filename=path))
        except SyntaxError as error:
            return [f"{path}:{error.lineno or 1}: cannot parse ({error.msg}), so its components cannot be checked"]
    audited: set[str] = set()
    for directory in audit_dirs(path):
        if directory not in audits_cache:
            audits_cache[directory] = audited_names(directory)
        audited |= audits_cache[directory]
    return [
        f"{path}:{c.line}: component '{c.name}' ({c.kind}) has no row in docs/audits/ "
        f"— add one (see docs/audits/components.md)"
        for c in sorted(components)
        if c.name not in audited
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="audited_components", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="Python files, pyproject.toml files and docs/audits/*.md tables")
    args = parser.parse_args(argv)

    files = [f for f in args.files if f.endswith(".py") or Path(f).name == "pyproject.toml"]
    if any(is_audit_table(f) for f in args.files):
        files += [f for f in tracked_component_files() if f not in files]

    audits_cache: dict[Path, set[str]] = {}
    failed = False
    for path in files:
        if is_test_file(path) or not os.path.isfile(path):
            continue
        for message in check_file(path, audits_cache):
            print(message)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
