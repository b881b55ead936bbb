#!/usr/bin/env python3
"""Reject raw numeric indices into buffers that have a named-dimension table (invariant 5, docs/invariants.md).

Every position in a multi-field buffer has a name in a ``DimTable`` (an
``IntEnum`` from ``foxhunt.dims`` whose members count from 0), so code says
``portfolio[:, PS.CASH]``, never ``portfolio[:, 3]``: a raw number silently
points at the wrong field the day the table changes.

Which names are such buffers is configured in the repository's
``pyproject.toml``; a pattern (``fnmatch`` style, matched against the variable
or attribute name being subscripted) maps to the table that names its
dimension::

    [tool.foxhunt.named-dimensions]
    buffers = {"isv" = "ISV slots", "portfolio" = "PS", "state" = "PS", "actions" = "Branch", "ps" = "PS"}

(that is also the default when the section is absent; a ``buffers`` table given
there replaces the default). The nearest ``pyproject.toml`` above the file is
used, else the one in the working directory.

Flagged: an integer literal (negative too) as a subscript element of a matching
buffer: ``portfolio[:, 3]``, ``ps[i, 2]``, ``actions[..., 0]``, ``isv[5]``,
``x.state[:, 1]``. Slices (``state[:, :3]``) are not flagged.

The definition site may opt a line out with the comment ``# dims: definition``;
it is honoured only in a module that defines a ``DimTable`` subclass.

Usage: python hooks/named_dimensions.py FILES...
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import os
import re
import sys
import tomllib
from pathlib import Path

DEFAULT_BUFFERS = {"isv": "ISV slots", "portfolio": "PS", "state": "PS", "actions": "Branch", "ps": "PS"}
TABLE_BASE = "DimTable"
OPT_OUT_RE = re.compile(r"#\s*dims:\s*definition\b")


class ConfigError(Exception):
    """The named-dimensions section of a pyproject.toml is malformed."""


def find_pyproject(path: str) -> Path | None:
    directory = Path(os.path.abspath(path)).parent
    for candidate in (directory, *directory.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate / "pyproject.toml"
        if (candidate / ".git").exists():
            break  # never borrow the configuration of an enclosing, unrelated project
    fallback = Path.cwd() / "pyproject.toml"
    return fallback if fallback.is_file() else None


def load_buffers(pyproject: Path | None) -> dict[str, str]:
    if pyproject is None:
        return DEFAULT_BUFFERS
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{pyproject}:1: cannot parse ({error})") from error
    section = data.get("tool", {}).get("foxhunt", {}).get("named-dimensions", {})
    buffers = section.get("buffers", DEFAULT_BUFFERS)
    if not isinstance(buffers, dict) or not all(isinstance(v, str) for v in buffers.values()):
        raise ConfigError(
            f"{pyproject}:1: [tool.foxhunt.named-dimensions] buffers must map buffer-name patterns "
            f'to table names, e.g. buffers = {{"portfolio" = "PS"}}'
        )
    return buffers


def _int_literal(node: ast.expr) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _int_literal(node.operand)
        if value is None:
            return None
        return -value if isinstance(node.op, ast.USub) else value
    # bool is an int subclass, but x[True] is a mask, not a position.
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _buffer_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


FLAT_BUFFERS = ("isv",)  # buffers without a row axis: their only axis is the named one


def _is_flat(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in FLAT_BUFFERS)


def _table_of(name: str, buffers: dict[str, str]) -> str | None:
    return next((table for pattern, table in buffers.items() if fnmatch.fnmatchcase(name, pattern)), None)


def defines_table(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if _buffer_name(base) == TABLE_BASE:
                    return True
    return False


def check_source(path: str, source: str, buffers: dict[str, str]) -> list[str]:
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        return [f"{path}:{error.lineno or 1}: cannot parse ({error.msg}), so its subscripts cannot be checked"]
    lines = source.split("\n")
    definition_site = defines_table(tree)
    findings = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Subscript):
            continue
        name = _buffer_name(node.value)
        table = _table_of(name, buffers) if name is not None else None
        if table is None:
            continue
        # The named dimension is a buffer's last axis: `state[:, 3]` names a field by number, while
        # `state[0]` selects row 0 (an environment). A lone subscript is a field only in a flat buffer
        # (one with no row axis, such as the ISV).
        if isinstance(node.slice, ast.Tuple):
            field = node.slice.elts[-1] if node.slice.elts else None
        else:
            field = node.slice if _is_flat(name) else None
        raw = [value for value in map(_int_literal, [field] if field is not None else []) if value is not None]
        if not raw:
            continue
        opted_out = any(OPT_OUT_RE.search(lines[i - 1]) for i in range(node.lineno, node.end_lineno + 1))
        if opted_out and definition_site:
            continue
        note = (
            " (`# dims: definition` is honoured only in a module that defines a DimTable)" if opted_out else ""
        )
        for value in raw:
            findings.append(
                (
                    node.lineno,
                    node.col_offset,
                    f"{path}:{node.lineno}: raw index {value} into '{name}' (named dimensions: {table}) "
                    f"— index with the table's member name instead (invariant 5, docs/invariants.md){note}",
                )
            )
    return [message for *_, message in sorted(findings)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="named_dimensions", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="Python files to check")
    args = parser.parse_args(argv)
    failed = False
    config_cache: dict[Path | None, dict[str, str]] = {}
    for path in args.files:
        if not path.endswith((".py", ".pyi")) or not os.path.isfile(path):
            continue
        pyproject = find_pyproject(path)
        try:
            if pyproject not in config_cache:
                config_cache[pyproject] = load_buffers(pyproject)
        except ConfigError as error:
            print(error)
            return 1
        with open(path, encoding="utf-8", errors="replace") as handle:
            source = handle.read()
        for message in check_source(path, source, config_cache[pyproject]):
            print(message)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
