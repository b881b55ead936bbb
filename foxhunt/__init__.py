"""foxhunt: distributional RL trading agents on an invariant-enforced plugin architecture.

The public surface is small on purpose: plugin authors need the hook markers,
the registrar's categories, the records, the monitor protocol, the branch table
and the inputs a loss receives; users need the config loader and the plugin
host. The shared slot and signal names are the module :mod:`foxhunt.contract`.
Everything else is internal (built-in plugins are held to this by
``.importlinter``, with the exceptions it lists).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("foxhunt")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

from foxhunt.actions import Branch
from foxhunt.dims import DimTable, auto
from foxhunt.errors import FoxhuntError
from foxhunt.plugin.spec import hookimpl, hookspec
from foxhunt.isv import ISV, IsvLayout, ReadOnlyISV, Slot
from foxhunt.learner.inputs import LossInputs
from foxhunt.monitoring.monitors import MONITOR_STATE_PREFIX, AdaptiveMonitor, DiagSnapshot, SignalSnapshot, reset_monitor
from foxhunt.plugin.host import PluginHost, PluginSelection
from foxhunt.plugin.records import (AugmentationFold, AugmentationInputs, AuxiliaryTask, CentredSupport, Combination,
                                    Encoder, GradientCombiner, Kernel, KernelPoint, LossComponent, ReplayAugmentation)
from foxhunt.plugin.registrar import Registrar
from foxhunt.state import ResetCategory, StateRegistry

__all__ = [
    "__version__",
    "AdaptiveMonitor",
    "AugmentationFold",
    "AugmentationInputs",
    "AuxiliaryTask",
    "Branch",
    "CentredSupport",
    "Combination",
    "DiagSnapshot",
    "DimTable",
    "Encoder",
    "FoxhuntError",
    "GradientCombiner",
    "ISV",
    "IsvLayout",
    "Kernel",
    "KernelPoint",
    "LossComponent",
    "LossInputs",
    "MONITOR_STATE_PREFIX",
    "PluginHost",
    "PluginSelection",
    "ReadOnlyISV",
    "ReplayAugmentation",
    "Registrar",
    "ResetCategory",
    "SignalSnapshot",
    "Slot",
    "StateRegistry",
    "auto",
    "hookimpl",
    "hookspec",
    "reset_monitor",
]
