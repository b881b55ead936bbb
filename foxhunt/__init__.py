"""foxhunt: distributional RL trading agents on an invariant-enforced plugin architecture.

The public surface is small on purpose: plugin authors need the hook markers,
the registrar's categories, the records and the monitor protocol; users need
the config loader and the plugin host. Everything else is internal.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("foxhunt")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

from foxhunt.dims import DimTable, auto
from foxhunt.errors import FoxhuntError
from foxhunt.hookspecs import hookimpl, hookspec
from foxhunt.isv import ISV, IsvLayout, ReadOnlyISV, Slot
from foxhunt.monitors import AdaptiveMonitor, DiagSnapshot
from foxhunt.plugins import PluginHost, PluginSelection
from foxhunt.records import Kernel, KernelPoint, LossComponent
from foxhunt.registrar import Registrar
from foxhunt.state import ResetCategory, StateRegistry

__all__ = [
    "__version__",
    "AdaptiveMonitor",
    "DiagSnapshot",
    "DimTable",
    "FoxhuntError",
    "ISV",
    "IsvLayout",
    "Kernel",
    "KernelPoint",
    "LossComponent",
    "PluginHost",
    "PluginSelection",
    "ReadOnlyISV",
    "Registrar",
    "ResetCategory",
    "Slot",
    "StateRegistry",
    "auto",
    "hookimpl",
    "hookspec",
]
