"""The core's own declarations: the slot the trainer itself writes.

Registered by :class:`~foxhunt.plugin.host.PluginHost` under the plugin name
``foxhunt`` before any entry-point plugin, so the core's slot lives in the same
layout, registry and snapshots as everyone else's. ``train.progress`` is the
CPU-born input of the adaptive schedules (the epsilon and tau kernels read it),
written only at epoch boundaries, never inside the training step.
"""

from __future__ import annotations

from foxhunt import contract
from foxhunt.plugin.spec import hookimpl
from foxhunt.plugin.registrar import Registrar
from foxhunt.state import ResetCategory

__all__ = ["foxhunt_declare", "CORE_PLUGIN_NAME", "PROGRESS"]

CORE_PLUGIN_NAME = contract.CORE
PROGRESS = contract.PROGRESS


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.slot(PROGRESS, doc="training progress within the fold in [0, 1] = epoch / epochs")
    registrar.state(PROGRESS, ResetCategory.FOLD_RESET, doc="restarts at every fold")
