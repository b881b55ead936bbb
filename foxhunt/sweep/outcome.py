"""What became of one trial: complete, or failed with a reason a person can act on.

A trial process that exits 0 with a ``summary.json`` is complete. Anything else
is failed, and the reason says how: the exit code and the last error line of its
log, the signal that killed it (``SIGKILL`` from the kernel's OOM killer or
``kill -9``), or the exception its executor saw (a Ray worker or node that died).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import attrs

__all__ = ["COMPLETE", "FAILED", "MISSING", "TrialOutcome", "process_outcome", "log_tail"]

COMPLETE, FAILED, MISSING = "complete", "failed", "missing"
# What the exit codes of a trial process mean (foxhunt.cli.common, foxhunt.sweep.trial).
EXIT_MEANINGS = {1: "crashed (a bug: see the traceback in its log)", 2: "refused by foxhunt",
                 3: "stopped early by SIGTERM or Ctrl-C", 4: "stopped by its regression bands"}


@attrs.frozen
class TrialOutcome:
    """``state`` is complete or failed; ``reason`` says why a trial failed; ``exit_code`` and ``signal`` as the
    executor saw them (None when the process never ran or its executor died with it)."""

    state: str
    reason: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    seconds: float | None = None
    host: str | None = None

    def record(self) -> dict[str, Any]:
        return {key: value for key, value in attrs.asdict(self).items() if value is not None}


def log_tail(path: Path, lines: int = 200) -> str:
    """The last error line of a trial's log (``error: ...`` or a traceback's last line), or ''."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    for line in reversed(text):
        if line.startswith("error: ") or (line and not line.startswith((" ", "{")) and "Error" in line):
            return line.removeprefix("error: ").strip()
    return ""


def process_outcome(returncode: int, run_dir: Path, log: Path, seconds: float, host: str | None = None) -> TrialOutcome:
    """The outcome of a trial process from its exit status (negative: the signal that killed it)."""
    if returncode == 0 and (Path(run_dir) / "summary.json").is_file():
        return TrialOutcome(COMPLETE, exit_code=0, seconds=seconds, host=host)
    if returncode < 0:
        name = _signal_name(-returncode)
        return TrialOutcome(FAILED, f"killed by signal {name} (the process died mid-run: OOM killer, kill -9, a "
                                    "lost node?); see its log", signal=name, seconds=seconds, host=host)
    meaning = EXIT_MEANINGS.get(returncode, "failed")
    if returncode == 0:
        meaning = "exited without writing summary.json"
    detail = log_tail(log)
    reason = f"exit code {returncode}: {meaning}" + (f": {detail}" if detail else "")
    return TrialOutcome(FAILED, reason, exit_code=returncode, seconds=seconds, host=host)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
