"""The sweep's progress bar (rich, as the trainer's): trials done of all, with the failures so far; only on a TTY."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["SweepProgress"]


class SweepProgress:
    """One bar over the trials of this invocation; silent when ``enabled`` is false or stderr is not a terminal."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.total = total
        self.failed = 0
        self._progress: Progress | None = None

    def __enter__(self) -> SweepProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("trials"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
            )
            self._progress.start()
            self._task = self._progress.add_task("trials", total=self.total, info="")
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def trial_done(self, name: str, state: str) -> None:
        self.failed += state != "complete"
        if self._progress is not None:
            info = f"last: {name} {state}" + (f"  ({self.failed} failed)" if self.failed else "")
            self._progress.update(self._task, advance=1, info=info)
