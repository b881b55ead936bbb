#!/usr/bin/env python3
"""Reject functions and classes named like an ISV-layout or checkpoint migration (invariant 4, docs/invariants.md).

A checkpoint records the ISV layout's fingerprint, and loading one whose
fingerprint differs fails fast with a slot diff. That is deliberate: a
"converted" checkpoint would silently feed values to slots that now mean
something else. So there is no migration path, and this hook keeps one from
being written. A name is rejected when, after CamelCase is split into words and
everything lower-cased, it

* contains ``migrat`` or ``upgrad`` together with ``layout``, ``isv``,
  ``checkpoint``, ``ckpt``, ``fingerprint``, ``schema`` or ``slot``
  (``migrate_isv_layout``, ``upgrade_checkpoint``, ``CheckpointMigrator``), or
* converts or remaps one: ``convert_checkpoint``, ``convert_old_layout``,
  ``remap_slots``, ``remap_isv`` and the like.

Test functions (``test_*`` in a ``test_*.py`` or ``*_test.py`` file) are
exempt: a test that shows a mismatch fails fast is no migration.

Usage: python hooks/no_layout_migration.py FILES...
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys

MIGRATE_RE = re.compile(r"migrat|upgrad")
LAYOUT_RE = re.compile(r"layout|isv|checkpoint|ckpt|fingerprint|schema|slot")
CONVERT_RE = re.compile(
    r"convert_(old_|legacy_)?(checkpoint|ckpt|layout|isv)"
    r"|remap_(old_|legacy_|isv_|checkpoint_)?(slots?|layout|isv|checkpoint)"
)

MESSAGE = (
    "looks like a layout migration — the ISV layout fingerprint is fail-fast by design "
    "(invariant 4, docs/invariants.md) and there is no migration path: retrain with the new layout instead"
)


def words(name: str) -> str:
    """``CheckpointMigrator`` -> ``checkpoint_migrator``; snake_case names stay as they are."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def is_migration_name(name: str) -> bool:
    normal = words(name)
    return bool((MIGRATE_RE.search(normal) and LAYOUT_RE.search(normal)) or CONVERT_RE.search(normal))


def is_test_module(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("test_") or name.endswith("_test.py")


def check_file(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        source = handle.read()
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        return [f"{path}:{error.lineno or 1}: cannot parse ({error.msg}), so its function names cannot be checked"]
    in_tests = is_test_module(path)
    messages = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "function"
        elif isinstance(node, ast.ClassDef):
            kind = "class"
        else:
            continue
        if kind == "function" and in_tests and node.name.startswith("test_"):
            continue
        if is_migration_name(node.name):
            messages.append((node.lineno, f"{path}:{node.lineno}: {kind} '{node.name}' {MESSAGE}"))
    return [message for _, message in sorted(messages)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="no_layout_migration", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="Python files to check")
    args = parser.parse_args(argv)
    failed = False
    for path in args.files:
        if not path.endswith((".py", ".pyi")) or not os.path.isfile(path):
            continue
        for message in check_file(path):
            print(message)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
