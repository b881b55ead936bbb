"""TensorBoard event files of a run's per-epoch metrics (``[run] tensorboard = true``).

The trainer hands each ``metrics.jsonl`` row to :meth:`TensorBoardLog.add_epoch`
right after appending it, at the epoch boundary only; nothing is written from
the training step. The event files go to ``RUN_DIR/tensorboard/`` (watch a run
with ``tensorboard --logdir RUN_DIR/tensorboard``, or ``--logdir runs`` for
every run side by side). Each row is one TensorBoard step, numbered
``fold × train.most_fold_epochs + epoch`` (``train.epochs`` unless flat-fold
retries are on) as ``foxhunt tune`` numbers its reports, so folds follow one
another on the x axis. The scalars are the row's numbers by
tag: ``validation/<metric>``, ``losses/<component>``,
``grad_norms/<component>``, ``grad_norms_clipped/<component>``,
``adaptive/<slot>`` (``adaptive/<slot>/<lane>`` for a slot of several lanes)
and ``train/<figure>`` (throughput, seconds, safety clips).

A resumed run repeats the epoch the kill interrupted; the writer opened by the
resumed process purges the events of that step and later ones, so TensorBoard
shows each epoch once. ``torch.utils.tensorboard`` needs the ``tensorboard``
package (the ``tensorboard`` extra); without it the run stops before training.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from foxhunt.errors import FoxhuntError

__all__ = ["TENSORBOARD_DIR", "TensorBoardLog", "epoch_scalars"]

TENSORBOARD_DIR = "tensorboard"

_GROUPS = ("validation", "losses", "grad_norms", "grad_norms_clipped")
_TRAIN_FIGURES = ("env_steps_per_s", "updates_per_s", "updates", "seconds", "validation_seconds", "safety_clips",
                  "first_update_seconds", "peak_device_memory_bytes")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def epoch_scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of one ``metrics.jsonl`` row, by TensorBoard tag (the module docstring lists them)."""
    scalars: dict[str, float] = {}
    for group in _GROUPS:
        for name, value in (row.get(group) or {}).items():
            if (number := _number(value)) is not None:
                scalars[f"{group}/{name}"] = number
    for slot, value in (row.get("adaptive") or {}).items():
        lanes = value if isinstance(value, list) else [value]
        for lane, lane_value in enumerate(lanes):
            if (number := _number(lane_value)) is not None:
                scalars[f"adaptive/{slot}/{lane}" if isinstance(value, list) else f"adaptive/{slot}"] = number
    for name in _TRAIN_FIGURES:
        if (number := _number(row.get(name))) is not None:
            scalars[f"train/{name}"] = number
    return scalars


class TensorBoardLog:
    """Writes each epoch's row as TensorBoard scalars under ``path``; the folder is made at the first epoch."""

    def __init__(self, path: Path, epochs_per_fold: int) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:
            raise FoxhuntError(
                f"[run] tensorboard = true needs the tensorboard package, which is not installed ({error}); "
                "install it with pip install 'foxhunt[tensorboard]' (or pip install tensorboard), or set "
                "run.tensorboard = false"
            ) from None
        self._writer_class = SummaryWriter
        self.path = Path(path)
        self.epochs_per_fold = epochs_per_fold
        self._writer: Any = None

    def step(self, row: Mapping[str, Any]) -> int:
        """The TensorBoard step of a row: ``fold × train.most_fold_epochs + epoch``."""
        return int(row["fold"]) * self.epochs_per_fold + int(row["epoch"])

    def add_epoch(self, row: Mapping[str, Any]) -> None:
        """Write the row's scalars at its step and flush them to the event file."""
        step = self.step(row)
        if self._writer is None:
            # the first row this process writes: events of this step and later, left by a killed process, go
            self._writer = self._writer_class(log_dir=str(self.path), purge_step=step)
        for tag, value in epoch_scalars(row).items():
            self._writer.add_scalar(tag, value, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
