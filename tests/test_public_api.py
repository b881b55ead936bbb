"""The public API is what ``foxhunt.__all__`` says, nothing more, nothing less; a change here is a deliberate one."""

from __future__ import annotations

import importlib.metadata
import inspect

import foxhunt
from foxhunt import errors

DOCUMENTED = {
    "__version__",
    "AdaptiveMonitor",
    "AugmentationFold",
    "AugmentationInputs",
    "Branch",
    "AuxiliaryTask",
    "CentredSupport",
    "Combination",
    "DiagSnapshot",
    "DimTable",
    "FoxhuntError",
    "Encoder",
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
    "SignalSnapshot",
    "Registrar",
    "ResetCategory",
    "Slot",
    "StateRegistry",
    "auto",
    "hookimpl",
    "hookspec",
    "reset_monitor",
}


def test_all_is_exactly_the_documented_list() -> None:
    assert set(foxhunt.__all__) == DOCUMENTED
    assert len(foxhunt.__all__) == len(DOCUMENTED)


def test_every_public_name_is_importable() -> None:
    namespace: dict[str, object] = {}
    exec("from foxhunt import *", namespace)  # noqa: S102 - the star import is what is under test
    assert DOCUMENTED <= set(namespace)
    for name in DOCUMENTED:
        assert getattr(foxhunt, name) is namespace[name]


def test_version_is_the_installed_distributions() -> None:
    assert foxhunt.__version__ == importlib.metadata.version("foxhunt")


def test_every_error_is_a_foxhunt_error() -> None:
    for name in errors.__all__:
        error = getattr(errors, name)
        if inspect.isclass(error) and issubclass(error, Exception):
            assert issubclass(error, foxhunt.FoxhuntError), name
