"""What a trial reports to Optuna, and how a pruned trial stops its run.

A trial is one ordinary training run. The trainer calls :class:`EpochReporter` after the
validation backtest of every epoch of every fold (``Trainer(on_epoch=...)``). The reporter

- reports that epoch's validation metric to the Optuna trial at step
  ``offset + fold * epochs + epoch``, so every trial of a study is compared at the same point of training
  (``offset`` is non-zero for the second and later data sources of a study over several, whose runs a trial
  trains one after another: ``source index * folds * epochs``);
- asks the pruner whether to stop, and if so requests a stop through :class:`TrialStop`, which the
  trainer honours at the end of the epoch exactly like Ctrl-C (a resume checkpoint, no traceback);
- keeps each fold's best validation value, whose mean over folds is the trial's objective.

The objective is read from these validation values, never from ``summary.json``: tuning selects
on validation windows, and whatever the summary reports as out-of-sample must stay untouched by
the selection.
"""

from __future__ import annotations

from typing import Any

from foxhunt.trainer.evaluation import better

__all__ = ["TrialStop", "EpochReporter", "direction_of"]


def direction_of(metric: str) -> str:
    """Optuna's direction for a validation metric (a drawdown is minimised, everything else maximised)."""
    return "minimize" if better(metric, 0.0, 1.0) else "maximize"


class TrialStop:
    """The trainer's ``stop`` object for a trial: a stop is requested when the trial is pruned or the user
    pressed Ctrl-C (``user`` is the command's :class:`~foxhunt.trainer.interrupt.StopFlag`)."""

    def __init__(self, user: Any = None) -> None:
        self.user = user
        self.pruned = False

    @property
    def interrupted(self) -> bool:
        return self.user is not None and self.user.requested

    @property
    def requested(self) -> bool:
        return self.pruned or self.interrupted

    def prune(self) -> None:
        self.pruned = True


class EpochReporter:
    """``on_epoch`` callback of one trial: report, maybe prune, remember each fold's best validation value."""

    def __init__(self, trial: Any, metric: str, epochs: int, stop: TrialStop, offset: int = 0) -> None:
        self.trial = trial
        self.metric = metric
        self.epochs = epochs
        self.stop = stop
        self.offset = offset
        self.fold_best: dict[int, float] = {}
        self.last_step: int | None = None

    def __call__(self, fold: int, epoch: int, validation: dict[str, float]) -> None:
        value = float(validation[self.metric])
        if better(self.metric, value, self.fold_best.get(fold)):
            self.fold_best[fold] = value
        step = self.offset + fold * self.epochs + epoch
        self.last_step = step
        self.trial.report(value, step)
        if not self.stop.pruned and self.trial.should_prune():
            self.stop.prune()

    def objective(self) -> float:
        """Mean over folds of each fold's best validation value (the epoch each fold would keep)."""
        if not self.fold_best:
            raise ValueError("no epoch was reported, so the trial has no objective")
        return sum(self.fold_best.values()) / len(self.fold_best)
