#!/usr/bin/env python3
"""Reject deferred work: marker words and placeholder function bodies (invariant 7, docs/invariants.md).

Two kinds of finding:

* a marker word (see ``MARKERS``: the usual to-do, fix-me, triple-x, hack and
  to-be-decided markers, in capitals, as whole words) anywhere on a line, in
  code, comments and docs alike;
* a placeholder body: a function whose body, after its docstring, is only
  ``pass``, ``...`` or ``raise NotImplementedError``. A docstring alone is
  not a placeholder: it says why the function does nothing. Abstract
  interfaces are exempt because an empty body is their design: functions
  decorated with ``abc.abstractmethod`` (or ``typing.overload``), methods of a
  ``typing.Protocol`` class, and pluggy hook specifications (``@hookspec``).

By default only what is being committed is checked: the added lines of the
staged diff (``git diff --cached``) of the given files, and the functions those
lines touch. An old marker elsewhere in a file then does not block an unrelated
change. ``--whole-file`` checks every line and every function instead; CI runs
it over the whole tree.

Usage: python hooks/no_deferred_work.py [--whole-file] FILES...
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys

# Built from pieces so that this file does not itself contain the words it rejects.
MARKERS = ("TO" + "DO", "FIX" + "ME", "X" * 3, "HA" + "CK", "T" + "BD")
# Whole words only (so ``TODOLIST`` or ``xxx_count`` do not count); a plural "s" still counts.
MARKER_RE = re.compile(r"\b(" + "|".join(MARKERS) + r")[sS]?\b")

# Decorators that declare an interface rather than an implementation.
INTERFACE_DECORATORS = {
    "abstractmethod",
    "abstractproperty",
    "abstractclassmethod",
    "abstractstaticmethod",
    "overload",
    "hookspec",
}

HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

INVARIANT = "invariant 7, docs/invariants.md"


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], capture_output=True, check=True)
    return result.stdout.decode("utf-8", errors="replace")


# git's C-style escapes, as it writes them in a quoted path.
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(name: str) -> str:
    """Undo git's quoting of a path (it quotes names with quotes, backslashes or control bytes)."""
    if not name.startswith('"'):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        if body[i] != "\\":
            out += body[i].encode("utf-8")
            i += 1
        elif body[i + 1] in "01234567":  # an octal byte, e.g. one byte of a UTF-8 sequence
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(_ESCAPES.get(body[i + 1], ord(body[i + 1])))
            i += 2
    return out.decode("utf-8", errors="replace")


def staged_added_lines(paths: list[str]) -> dict[str, dict[int, str]]:
    """The added lines of the staged diff: ``{path as given: {line number: text}}``."""
    top = _git("rev-parse", "--show-toplevel").strip()
    given = {os.path.realpath(path): path for path in paths}
    # Fixed prefixes and no external tools, whatever the user's git config says, so the output parses.
    diff = _git(
        "-c", "core.quotePath=false",
        "diff", "--cached", "-U0", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
        "--src-prefix=a/", "--dst-prefix=b/",
        "--", *paths,
    )
    added: dict[str, dict[int, str]] = {}
    path: str | None = None
    new_line = old_left = new_left = 0
    # Split on "\n" only: str.splitlines would also split on form feeds and the like inside a line.
    for line in diff.split("\n"):
        if old_left or new_left:
            # Inside a hunk the counts from its header say which lines are content,
            # so an added line that happens to start with "++" is not mistaken for a header.
            if line.startswith("+"):
                if path is not None:
                    added.setdefault(path, {})[new_line] = line[1:]
                new_line += 1
                new_left -= 1
            elif line.startswith("-"):
                old_left -= 1
            continue
        if line.startswith("+++ "):
            name = _unquote(line[4:].rstrip("\t"))
            if name == "/dev/null":
                path = None  # a deleted file adds nothing
            else:
                real = os.path.realpath(os.path.join(top, name[len("b/"):]))
                path = given.get(real, name[len("b/"):])
        elif match := HUNK_RE.match(line):
            old_count, start, new_count = match.groups()
            old_left = int(old_count) if old_count is not None else 1
            new_left = int(new_count) if new_count is not None else 1
            new_line = int(start)
    return added


def marker_findings(lines: dict[int, str]) -> list[tuple[int, str]]:
    findings = []
    for number, text in lines.items():
        for match in MARKER_RE.finditer(text):
            findings.append(
                (number, f"deferred-work marker '{match.group(0)}' — finish the work or file an issue ({INVARIANT})")
            )
    return findings


def _simple_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_protocol(cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        if isinstance(base, ast.Subscript):  # Protocol[T]
            base = base.value
        if _simple_name(base) == "Protocol":
            return True
    return False


def _is_constant(node: ast.expr, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def placeholder_kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """How the function's body is a placeholder, or None when it does something."""
    body = fn.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    if len(body) != 1:
        # A docstring alone is a function that does nothing on purpose and says why
        # (a click command group, a no-op hook), so only pass, ... and raise count.
        return None
    statement = body[0]
    if isinstance(statement, ast.Pass):
        return "its body is only `pass`"
    if isinstance(statement, ast.Expr) and _is_constant(statement.value, Ellipsis):
        return "its body is only `...`"
    if isinstance(statement, ast.Raise) and statement.exc is not None:
        if _simple_name(statement.exc) == "NotImplementedError":
            return "its body only raises NotImplementedError"
    return None


def placeholder_findings(tree: ast.AST, touched: set[int] | None) -> list[tuple[int, str]]:
    """Placeholder functions; with ``touched``, only those whose lines include one of them."""
    findings: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_protocol: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, _is_protocol(child))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                check(child, in_protocol)
                visit(child, False)
            else:
                visit(child, False)

    def check(fn: ast.FunctionDef | ast.AsyncFunctionDef, in_protocol: bool) -> None:
        if in_protocol or any(_simple_name(d) in INTERFACE_DECORATORS for d in fn.decorator_list):
            return
        first_line = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        if touched is not None and not touched.intersection(range(first_line, fn.end_lineno + 1)):
            return
        kind = placeholder_kind(fn)
        if kind is not None:
            findings.append(
                (
                    fn.lineno,
                    f"placeholder function '{fn.name}' ({kind}) — implement it, or make it an abstract "
                    f"interface (@abstractmethod, a typing.Protocol, a pluggy @hookspec) ({INVARIANT})",
                )
            )

    visit(tree, False)
    return findings


def check_file(path: str, added: dict[int, str] | None) -> list[tuple[int, str]]:
    """Findings for one file; ``added`` is its staged added lines, or None to check the whole file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except (FileNotFoundError, IsADirectoryError):
        return []  # deleted or not a regular file: nothing of it is committed
    if "\0" in text:
        return []  # binary
    if added is None:
        lines = dict(enumerate(text.split("\n"), start=1))
        touched = None
    else:
        lines = added
        touched = set(added)
    findings = marker_findings(lines)
    if path.endswith(".py") and (touched is None or touched):
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError:
            # Not this hook's business: whatever compiles or lints the file reports it better.
            tree = None
        if tree is not None:
            findings += placeholder_findings(tree, touched)
    return sorted(findings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="no_deferred_work", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="files to check (pre-commit passes the changed ones)")
    parser.add_argument(
        "--whole-file",
        action="store_true",
        help="check every line and function of the files, not only the staged added lines (for CI)",
    )
    args = parser.parse_args(argv)
    if not args.files:
        return 0

    if args.whole_file:
        added_by_file: dict[str, dict[int, str]] | None = None
    else:
        try:
            added_by_file = staged_added_lines(args.files)
        except (subprocess.CalledProcessError, FileNotFoundError) as error:
            if isinstance(error, subprocess.CalledProcessError):
                detail = error.stderr.decode(errors="replace").strip()
            else:
                detail = str(error)
            print(
                f"no_deferred_work: cannot read the staged diff ({detail}); "
                "run it inside a git repository, or pass --whole-file"
            )
            return 1

    failed = False
    for path in args.files:
        added = None if added_by_file is None else added_by_file.get(path, {})
        for line, message in check_file(path, added):
            print(f"{path}:{line}: {message}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
