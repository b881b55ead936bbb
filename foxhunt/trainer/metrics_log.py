"""``metrics.jsonl``: one JSON object per epoch, appended so that a kill can tear at most the last line.

Each line is appended by one ``write`` to a file opened with ``O_APPEND``, so
lines never interleave or overlap; the file is flushed to the disk (``fsync``)
at each epoch boundary, before the resume checkpoint records how many lines
are committed. A process killed while appending leaves at most a torn last line
(bytes without their newline, or bytes the disk never received after a power
loss), which :meth:`MetricsLog.restore` drops on ``--resume``, saying so, before
cutting the file back to the checkpoint's line count.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import structlog

from foxhunt import durable
from foxhunt.errors import FoxhuntError

__all__ = ["MetricsLog"]

log = structlog.get_logger(__name__)


def _complete(line: bytes) -> bool:
    """A whole line: ends with its newline and is one JSON object (NaN allowed, as ``json.dumps`` writes it)."""
    if not line.endswith(b"\n"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, UnicodeDecodeError):
        return False


class MetricsLog:
    """Appender and repairer of one run's ``metrics.jsonl``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._handle: int | None = None
        self._lines: int | None = None

    def _open(self) -> int:
        if self._handle is None:
            self._handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._handle

    def append(self, row: dict[str, Any]) -> None:
        """Append ``row`` as one line, in one write (flushed to the disk by :meth:`sync`)."""
        count = self.lines()
        durable.write_all(self._open(), (json.dumps(row, sort_keys=True) + "\n").encode("utf-8"))
        self._lines = count + 1

    def sync(self) -> None:
        """Flush appended lines to the disk (the epoch boundary, before the resume checkpoint counts them)."""
        if self._handle is not None:
            os.fsync(self._handle)

    def lines(self) -> int:
        """Lines in the file (counted once, then kept as lines are appended)."""
        if self._lines is None:
            self._lines = self.path.read_bytes().count(b"\n") if self.path.exists() else 0
        return self._lines

    def restore(self, keep: int) -> None:
        """Drop a torn last line, then cut the file to its first ``keep`` lines (those the resume checkpoint counted).

        Lines past ``keep`` belong to an epoch that did not reach its checkpoint: it runs again. Fewer than
        ``keep`` whole lines means the file was cut or edited since: refused, since the report would miss epochs.
        """
        self.close()
        data = self.path.read_bytes() if self.path.exists() else b""
        *whole, tail = data.split(b"\n")
        lines = [line + b"\n" for line in whole] + ([tail] if tail else [])
        if lines and not _complete(lines[-1]):
            log.warning("metrics.jsonl: dropped a torn last line (the process stopped while writing it)",
                        path=str(self.path), line=len(lines), bytes=len(lines[-1]))
            lines.pop()
        if len(lines) < keep:
            raise FoxhuntError(
                f"{self.path}: holds {len(lines)} whole lines, but the resume checkpoint counted {keep}; the file was "
                "cut or edited after the run stopped. Put the original file back, or start a new run"
            )
        kept = b"".join(lines[:keep])
        if kept != data:
            durable.write_bytes(self.path, kept)
        self._lines = keep

    def close(self) -> None:
        if self._handle is not None:
            os.close(self._handle)
            self._handle = None
