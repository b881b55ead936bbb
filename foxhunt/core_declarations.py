"""The core's own declarations: the slots the trainer itself writes.

Registered by :class:`~foxhunt.plugins.PluginHost` under the plugin name
``foxhunt`` before any entry-point plugin, so the core's slots live in the same
layout, registry and snapshots as everyone else's. These are the CPU-born
inputs of the adaptive kernels (epoch index, totals, progress), written only at
epoch and fold boundaries, never inside the training step.
"""

from __future__ import annotations

from foxhunt.hookspecs import hookimpl
from foxhunt.registrar import Registrar
from foxhunt.state import ResetCategory

__all__ = ["foxhunt_declare", "CORE_PLUGIN_NAME", "EPOCH", "TOTAL_EPOCHS", "PROGRESS", "FOLD"]

CORE_PLUGIN_NAME = "foxhunt"
EPOCH = "train.epoch"
TOTAL_EPOCHS = "train.total_epochs"
PROGRESS = "train.progress"
FOLD = "train.fold"


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.slot(EPOCH, doc="epoch index within the current fold (0-based), written at each epoch boundary")
    registrar.state(EPOCH, ResetCategory.FOLD_RESET, doc="restarts at every fold")
    registrar.slot(TOTAL_EPOCHS, init=1.0, doc="epochs per fold, written once per run")
    registrar.state(TOTAL_EPOCHS, ResetCategory.TRAINING_PERSIST, doc="fixed by the config for the whole run")
    registrar.slot(PROGRESS, doc="training progress within the fold in [0, 1] = epoch / total_epochs")
    registrar.state(PROGRESS, ResetCategory.FOLD_RESET, doc="restarts at every fold")
    registrar.slot(FOLD, doc="index of the current walk-forward fold")
    registrar.state(FOLD, ResetCategory.TRAINING_PERSIST, doc="advanced by the trainer, never reset")
