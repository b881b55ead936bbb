"""Progress bars for folds, epochs and steps (rich), shown only on a terminal."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["RunProgress"]


class RunProgress:
    """Three bars (folds, epochs of the fold, steps of the epoch); silent when ``enabled`` is false or off a TTY."""

    def __init__(self, enabled: bool, folds: int, epochs: int) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.folds, self.epochs = folds, epochs
        self._progress: Progress | None = None

    def __enter__(self) -> RunProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=False,
            )
            self._progress.start()
            self._folds = self._progress.add_task("folds", total=self.folds, info="")
            self._epochs = self._progress.add_task("epochs", total=self.epochs, info="")
            self._steps = self._progress.add_task("steps", total=None, info="")
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def epoch_started(self, steps: int) -> None:
        if self._progress is not None:
            self._progress.reset(self._steps, total=steps)

    def step_done(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._steps)

    def epoch_done(self, fold: int, epoch: int, validation: dict[str, float], rates: dict[str, float]) -> None:
        if self._progress is None:
            return
        info = (
            f"validation sharpe {validation['sharpe']:+.2f}  pnl {validation['net_pnl']:+,.0f}  "
            f"{rates['env_steps_per_s']:,.0f} env steps/s  {rates['updates_per_s']:,.1f} updates/s"
        )
        self._progress.update(self._epochs, completed=epoch + 1, info=info)
        if epoch + 1 == self.epochs:
            self._progress.reset(self._epochs, total=self.epochs)

    def fold_done(self, fold: int, test: dict[str, float]) -> None:
        """The fold's selected policy was backtested on its test window: the out-of-sample figure so far."""
        if self._progress is None:
            return
        info = f"fold {fold} test sharpe {test['sharpe']:+.2f}  pnl {test['net_pnl']:+,.0f}"
        self._progress.update(self._folds, advance=1, info=info)  # with folds.only, fold k is the first
