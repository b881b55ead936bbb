"""Monitors of learner statistics that no adaptive kernel owns: gradient-component norms and Q statistics.

They read named signals (host snapshots of the learner's device tensors, taken
at epoch boundaries), never the training state itself. Signal names and shapes
are listed in docs/adaptive.md; the trainer passes the loss-component names as
labels of the per-component signals.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from foxhunt import (
    MONITOR_STATE_PREFIX,
    AdaptiveMonitor,
    Branch,
    ReadOnlyISV,
    Registrar,
    ResetCategory,
    SignalSnapshot,
    contract,
    hookimpl,
    reset_monitor,
)

__all__ = [
    "COMPONENT_GRAD_NORM",
    "COMPONENT_GRAD_NORM_CLIPPED",
    "GRAD_NORM",
    "SAFETY_CLIPS",
    "Q_MEAN",
    "Q_STD",
    "Q_GAP",
    "GREEDY_SHARE",
    "GradientMonitor",
    "QStatsMonitor",
    "foxhunt_declare",
    "foxhunt_monitors",
]

COMPONENT_GRAD_NORM = contract.COMPONENT_GRAD_NORM  # [components] pre-clip norm of each loss component's gradient
COMPONENT_GRAD_NORM_CLIPPED = contract.COMPONENT_GRAD_NORM_CLIPPED  # [components] after its budget clip
GRAD_NORM = contract.GRAD_NORM  # [1] norm of the summed, budget-clipped gradient
SAFETY_CLIPS = contract.SAFETY_CLIPS  # [1] running count of optimiser safety-clip firings
Q_MEAN = contract.Q_MEAN  # [Branch]
Q_STD = contract.Q_STD  # [Branch]
Q_GAP = contract.Q_GAP  # [Branch]
GREEDY_SHARE = contract.GREEDY_SHARE  # [Branch]


class GradientMonitor(AdaptiveMonitor):
    """Per-component pre-clip and clipped gradient norms, the combined norm and the safety-clip count.

    Its fire rate is the fraction of observations at which the safety clip
    fired since the previous one: with budgets summing to 1 it should stay 0.
    """

    name = "gradients"
    signals = (COMPONENT_GRAD_NORM, COMPONENT_GRAD_NORM_CLIPPED, GRAD_NORM, SAFETY_CLIPS)

    def reset_statistics(self) -> None:
        super().reset_statistics()
        self._clips: float | None = None

    def observe(self, view: ReadOnlyISV, signals: SignalSnapshot | None = None) -> None:
        if signals is None or SAFETY_CLIPS not in signals:
            return
        clips = float(np.ravel(signals[SAFETY_CLIPS])[0])
        if self._clips is not None and clips > self._clips:
            self.fires += 1
        self._clips = clips
        self.observations += 1


class QStatsMonitor(AdaptiveMonitor):
    """Per-branch batch statistics of the expected Q: mean, standard deviation, gap (max − mean over actions),
    and the share of the batch taking the most common greedy action."""

    name = "q_stats"
    signals = (Q_MEAN, Q_STD, Q_GAP, GREEDY_SHARE)
    labels = {Q_MEAN: Branch.names(), Q_STD: Branch.names(), Q_GAP: Branch.names(), GREEDY_SHARE: Branch.names()}


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    for monitor in (GradientMonitor, QStatsMonitor):
        registrar.state(MONITOR_STATE_PREFIX + monitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                        doc=f"fire-rate statistics of the {monitor.name} monitor (per fold)")


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [GradientMonitor(), QStatsMonitor()]
