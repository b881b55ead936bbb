"""Stop at the next safe point on Ctrl-C or SIGTERM, instead of dying mid-update.

The first signal only sets a flag that the trainer checks at epoch boundaries
(where every piece of state is consistent and a checkpoint can be written); a
second signal restores the default behaviour, so an impatient user can still
kill the process.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import structlog

__all__ = ["StopFlag"]

log = structlog.get_logger(__name__)


class StopFlag:
    """Context manager installing SIGINT/SIGTERM handlers that request a graceful stop."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self, reason: str = "requested") -> None:
        """Ask the trainer to stop at its next safe point (also what the signal handler does)."""
        if not self._event.is_set():
            log.warning("stop requested; finishing the epoch and writing a checkpoint", reason=reason)
        self._event.set()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.request(signal.Signals(signum).name)
        # A second signal falls through to the default handler (KeyboardInterrupt / terminate).
        signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.getsignal(signum)
                signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
