#!/usr/bin/env python3
"""Check that the committed registry/ snapshots match the composed registries.

The snapshots (ISV layout with its fingerprint, state-reset table,
named-dimension tables) are reviewed like a lock file: a layout change must
show up as a diff in registry/. ``foxhunt registry check`` composes the
registries of the installed plugins and compares; this hook runs it and passes
its output and exit status through. It needs the project installed in the
environment that runs the hooks (``pip install -e .``); without the ``foxhunt``
command it says so and fails, because skipping would let a layout change
through unreviewed.

Usage: python hooks/registry_snapshot.py [FILES...]   (file names are ignored: the check covers the whole registry)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

NOT_INSTALLED = (
    "registry_snapshot: the `foxhunt` command is not on PATH, so the registry/ snapshots cannot be checked. "
    "Install the project into the environment that runs the hooks: pip install -e . "
    "(from the repository root), then commit again."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="registry_snapshot", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="ignored: the check always covers the whole registry")
    parser.parse_args(argv)
    foxhunt = shutil.which("foxhunt")
    if foxhunt is None:
        print(NOT_INSTALLED)
        return 1
    # Output goes straight to our stdout/stderr: foxhunt's report is the message.
    status = subprocess.run([foxhunt, "registry", "check"]).returncode
    # A negative status means a signal killed it; that is a failure too.
    return status if status >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
