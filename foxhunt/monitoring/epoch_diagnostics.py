"""Epoch-boundary diagnostics: observe every monitor, diagnose, and emit one ``health_diag`` event.

The trainer calls :func:`epoch_diagnostics` once per epoch boundary, outside
the training step: it takes one read-only ISV snapshot and one read-only
signal snapshot (the only host-device copies), lets every monitor observe and
diagnose them, logs every :class:`~foxhunt.monitoring.monitors.DiagSnapshot` in a single
structlog event named ``health_diag`` and, when given an exporter, updates
the Prometheus gauges. Monitors never see the live ISV (invariant 8).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog
import torch

from foxhunt import contract
from foxhunt.isv import ISV, ReadOnlyISV
from foxhunt.monitoring.monitors import AdaptiveMonitor, DiagSnapshot, SignalSnapshot

__all__ = ["HEALTH_DIAG_EVENT", "observe_monitors", "diagnose_monitors", "emit_health_diag", "epoch_diagnostics"]

HEALTH_DIAG_EVENT = "health_diag"
HEALTH_SLOT = contract.HEALTH


def observe_monitors(
    monitors: Iterable[AdaptiveMonitor], view: ReadOnlyISV, signals: SignalSnapshot | None = None
) -> None:
    """Let every monitor record the current values (updates fire-rate statistics)."""
    for monitor in monitors:
        monitor.observe(view, signals)


def diagnose_monitors(
    monitors: Iterable[AdaptiveMonitor], view: ReadOnlyISV, signals: SignalSnapshot | None = None
) -> list[DiagSnapshot]:
    """Every monitor's snapshot, in monitor order."""
    return [monitor.diagnose(view, signals) for monitor in monitors]


def emit_health_diag(
    snapshots: Sequence[DiagSnapshot],
    *,
    health: float | None = None,
    logger: Any = None,
    **context: Any,
) -> dict[str, Any]:
    """Log one ``health_diag`` event carrying every snapshot; returns the event's fields.

    ``context`` is bound into the event (e.g. ``fold=``, ``epoch=``). Keys of
    non-finite values are listed under ``non_finite`` so a log search finds them.
    """
    logger = logger if logger is not None else structlog.get_logger("foxhunt.monitoring.epoch_diagnostics")
    non_finite = sorted(
        f"{snapshot.name}:{key}" for snapshot in snapshots for key, value in snapshot.values.items() if not math.isfinite(value)
    )
    fields = {
        **context,
        "health": health,
        "snapshots": [snapshot.to_dict() for snapshot in snapshots],
        "non_finite": non_finite,
    }
    if non_finite:
        logger.warning(HEALTH_DIAG_EVENT, **fields)
    else:
        logger.info(HEALTH_DIAG_EVENT, **fields)
    return fields


def epoch_diagnostics(
    monitors: Sequence[AdaptiveMonitor],
    isv: ISV,
    *,
    fold: int,
    epoch: int,
    signals: Mapping[str, torch.Tensor] | None = None,
    labels: Mapping[str, Iterable[str]] | None = None,
    exporter: Any = None,
    logger: Any = None,
) -> list[DiagSnapshot]:
    """Observe, diagnose, log ``health_diag`` and update ``exporter`` (a :class:`MetricsExporter`) if given.

    ``signals`` are the learner's and environment's device tensors (see
    docs/adaptive.md); ``labels`` names the elements of per-component signals,
    e.g. ``{"learner.component_grad_norm": ("c51", "mse", ...)}``.
    """
    view = isv.snapshot()
    snapshot = SignalSnapshot.capture(signals, labels) if signals else None
    observe_monitors(monitors, view, snapshot)
    snapshots = diagnose_monitors(monitors, view, snapshot)
    health = view.value(HEALTH_SLOT) if HEALTH_SLOT in view.layout.offsets else None
    emit_health_diag(snapshots, health=health, logger=logger, fold=fold, epoch=epoch)
    if exporter is not None:
        exporter.update(snapshots, fold=fold, epoch=epoch, health=health)
    return snapshots
