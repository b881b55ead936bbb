"""Start-up cost of a short ``foxhunt train``: cold (empty caches) against warm (kernels and features cached).

Usage: ``python benchmarks/startup.py [--repeats 2] [--set KEY=VALUE ...]``

Runs the same 2-step training command ``1 + repeats`` times as separate
processes (with the ``foxhunt`` package this script imports, started in a scratch
directory so that no ``foxhunt/`` in the working directory shadows it), all
with ``FOXHUNT_CACHE_DIR`` pointed at one fresh temporary
directory: the first run finds it empty (every numba launcher compiles, the
feature matrix is computed), the later ones find it full. Prints wall seconds
and CPU seconds (user + system, from the child's resource usage) for each run:
on a shared machine wall time stretches with the other load, CPU time much less.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import foxhunt

__all__ = ["main", "TRAIN_ARGS"]

# The console script's body, run by this interpreter (no shell shim in the timing).
_FOXHUNT = "import sys; from foxhunt.cli.main import main; sys.argv[0] = 'foxhunt'; sys.exit(main())"
# Two vector steps of the CPU profile's 64 environments and two updates, with no replay warm-up: a run whose
# warm-up outlasts its steps would never train, and `foxhunt train` refuses it (foxhunt/config_checks.py).
TRAIN_ARGS = ("--set", "train.epochs=1", "--set", "train.env_steps_per_epoch=128", "--set", "train.updates_per_epoch=2",
              "--set", "train.warmup_env_steps=0", "--set", "folds.n_folds=1", "--no-progress")


def _child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one child process; its output is discarded unless it fails."""
    cpu_before = _child_cpu_seconds()
    start = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"the command failed (exit {result.returncode}): {' '.join(command)}")
    return wall, _child_cpu_seconds() - cpu_before


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="warm runs after the cold one")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="extra config override for every run, e.g. learner.batch_size=64")
    args = parser.parse_args(argv)
    extra = [item for override in args.overrides for item in ("--set", override)]
    with tempfile.TemporaryDirectory(prefix="foxhunt-startup-") as scratch:
        source_root = str(Path(foxhunt.__file__).resolve().parents[1])
        search_path = os.pathsep.join(filter(None, (source_root, os.environ.get("PYTHONPATH"))))
        env = dict(os.environ, FOXHUNT_CACHE_DIR=str(Path(scratch) / "cache"), PYTHONPATH=search_path)
        env.pop("NUMBA_CACHE_DIR", None)
        rows = []
        for index in range(1 + args.repeats):
            command = [sys.executable, "-c", _FOXHUNT, "train", *TRAIN_ARGS, *extra, "--out", str(Path(scratch) / f"run{index}")]
            wall, cpu = timed_run(command, env, Path(scratch))
            rows.append(("cold" if index == 0 else "warm", wall, cpu))
    print(f"foxhunt from {source_root}")
    print(f"command: foxhunt train {' '.join(TRAIN_ARGS + tuple(extra))}  ({os.cpu_count()} CPUs)")
    print("| run | wall s | CPU s |")
    print("|---|---:|---:|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
