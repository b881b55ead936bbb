"""One writer per run folder: ``foxhunt.lock`` names the process (PID and host) that is writing it.

The lock is an advisory ``flock`` on the lock file, held for as long as the
writer runs; the operating system drops it when the process ends, however it
ends, so a lock cannot outlive a killed writer on this host. The file's content
(PID, host, start time) is what a refused process is told. A lock file left
behind by a process that was killed is taken over, with a warning naming that
process. A lock file written on another host is never taken over: this host
cannot tell whether that process still runs (a shared filesystem may not carry
``flock`` across hosts), so the message says how to remove it by hand.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
from pathlib import Path
from typing import Any

import structlog

from foxhunt import durable
from foxhunt.errors import FoxhuntError

__all__ = ["LOCK_FILE", "RunLock", "RunLocked"]

log = structlog.get_logger(__name__)

LOCK_FILE = "foxhunt.lock"


class RunLocked(FoxhuntError):
    """Another process holds the run folder's lock."""


def _holder(handle: int) -> dict[str, Any]:
    """What the lock file says about its writer ({} when empty or unreadable: a writer killed while writing it)."""
    os.lseek(handle, 0, os.SEEK_SET)
    data = os.read(handle, 4096)
    try:
        holder = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    return f"PID {holder.get('pid', '?')} on host {holder.get('host', '?')} (since {holder.get('started', '?')})"


class RunLock:
    """The lock of one run folder; :meth:`acquire` it before writing anything there, :meth:`release` when done."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK_FILE
        self._handle: int | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`RunLocked` naming the process that holds it."""
        while True:
            handle = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(handle)
                os.close(handle)
                raise RunLocked(
                    f"{self.path.parent} is being written by another foxhunt process: {_describe(holder)}. "
                    "Wait for it to finish or stop it (Ctrl-C stops it at the end of its epoch), or choose another --out"
                ) from None
            # A releasing holder unlinks the file while it still holds the flock: if the name now points to
            # another file (or none), this flock is on a file nobody else will look at. Open the name again.
            try:
                same = os.stat(self.path).st_ino == os.fstat(handle).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(handle)
        try:
            self._take_over(handle)
        except BaseException:
            os.close(handle)
            raise
        self._handle = handle

    def _take_over(self, handle: int) -> None:
        holder = _holder(handle)
        host = socket.gethostname()
        if holder.get("host") not in (None, host):
            raise RunLocked(
                f"{self.path} names {_describe(holder)}, another host; this host cannot tell whether that process "
                "still runs. If it does not, delete the lock file and try again"
            )
        if holder and holder.get("pid") != os.getpid():
            log.warning("took over the lock of a process that ended without releasing it (killed?)",
                        lock=str(self.path), pid=holder.get("pid"), host=holder.get("host"), started=holder.get("started"))
        mine = {"pid": os.getpid(), "host": host, "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        os.ftruncate(handle, 0)
        os.lseek(handle, 0, os.SEEK_SET)
        durable.write_all(handle, (json.dumps(mine) + "\n").encode("utf-8"))
        os.fsync(handle)

    def release(self) -> None:
        """Remove the lock file, then drop the lock (in that order: see :meth:`acquire`)."""
        if self._handle is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._handle)
            self._handle = None
