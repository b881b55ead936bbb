"""Every exception foxhunt raises on purpose, in one tree.

Each message says what went wrong *and what to do next*; the CLI prints the
message as one paragraph (no traceback unless ``--debug``).
"""

from __future__ import annotations

__all__ = [
    "FoxhuntError",
    "NumericalFault",
    "BandStop",
    "ConfigError",
    "PluginError",
    "PluginProblem",
    "LifecycleError",
    "LayoutError",
    "FingerprintMismatch",
    "StateRegistryError",
    "MonitorWriteError",
    "DataError",
    "BudgetError",
    "CheckpointError",
]


class FoxhuntError(Exception):
    """Base of every error foxhunt raises deliberately."""


class ConfigError(FoxhuntError):
    """A config file, key or ``--set`` override is wrong (message names file and key path)."""


class PluginProblem:
    """One problem found while loading or declaring plugins.

    Kept as a value (not raised) so that every problem of every plugin can be
    collected and reported together in one :class:`PluginError`.
    """

    __slots__ = ("plugin", "distribution", "version", "message")

    def __init__(self, plugin: str, distribution: str, version: str, message: str) -> None:
        self.plugin = plugin
        self.distribution = distribution
        self.version = version
        self.message = message

    def __str__(self) -> str:
        return f"[{self.plugin} from {self.distribution} {self.version}] {self.message}"

    def __repr__(self) -> str:
        return f"PluginProblem({self})"


class PluginError(FoxhuntError):
    """One report listing every plugin problem found in one load/declare transaction."""

    def __init__(self, problems: list[PluginProblem]) -> None:
        self.problems = list(problems)
        lines = [f"{len(self.problems)} plugin problem(s) stop this run:"]
        lines += [f"  - {problem}" for problem in self.problems]
        lines.append("Fix the plugins above (or disable them in [plugins] of the config) and run again.")
        super().__init__("\n".join(lines))


class LifecycleError(FoxhuntError):
    """A call came in the wrong lifecycle phase (e.g. a declaration after freeze)."""


class LayoutError(FoxhuntError):
    """The ISV layout is inconsistent (duplicate slot, bad width, unknown slot name)."""


class CheckpointError(FoxhuntError):
    """A checkpoint is missing, unreadable, or does not belong to this run."""


class FingerprintMismatch(LayoutError, CheckpointError):
    """A checkpoint's ISV fingerprint differs from the current layout; carries the slot diff.

    Both a layout error (invariant 4) and a checkpoint error: whoever refuses foreign checkpoints catches it too.
    """

    def __init__(self, source: str, expected: int, found: int, diff_text: str) -> None:
        self.expected = expected
        self.found = found
        self.diff_text = diff_text
        super().__init__(
            f"{source}: ISV layout fingerprint {found:016x} does not match the current layout "
            f"{expected:016x}. There is no migration: train with the plugin set that made the "
            f"checkpoint, or start a new run.\nSlot diff (checkpoint -> current):\n{diff_text}"
        )


class StateRegistryError(FoxhuntError):
    """The state-reset registry is incomplete or asked for something it does not know."""


class MonitorWriteError(FoxhuntError):
    """A monitor tried to write the ISV or training state; monitors are read-only."""


class DataError(FoxhuntError):
    """Market data is unusable; the message names file, row and column."""


class BudgetError(FoxhuntError):
    """Loss-component gradient budgets are invalid (they must sum to exactly 1)."""


class NumericalFault(FoxhuntError):
    """A loss, gradient, ISV slot or reward became NaN or infinite; ``source`` names the first one."""

    def __init__(self, message: str, source: str, fold: int, epoch: int) -> None:
        super().__init__(message)
        self.source = source
        self.fold = fold
        self.epoch = epoch


class BandStop(FoxhuntError):
    """A metric left its regression band (``foxhunt train --bands``); ``record`` is what summary.json keeps."""

    def __init__(self, message: str, record: dict) -> None:
        super().__init__(message)
        self.record = record
