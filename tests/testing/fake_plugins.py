"""Small in-memory plugins for the kit's own tests: one well-formed, and variants that each break one rule.

Each builder returns a fresh module object (as an entry point would load it),
so a test can register it on any number of hosts.
"""

from __future__ import annotations

import types

import torch

from foxhunt import AdaptiveMonitor, Kernel, KernelPoint, hookimpl
from foxhunt.monitoring.monitors import MONITOR_STATE_PREFIX, reset_monitor
from foxhunt.state import ResetCategory

__all__ = [
    "good_plugin",
    "slot_without_reset_entry",
    "misspelled_hook",
    "stray_kernel_write",
    "writing_monitor",
    "reset_that_forgets",
    "reset_that_touches_persist",
    "window_reset_that_forgets",
]

COUNTER = "toy.counter"  # fold-reset: counts STEP kernel launches within a fold
TOTAL = "toy.total"  # training-persist: counts launches over the whole run
LEVEL = "toy.level"  # soft-reset: bootstrap 1.0


def _module(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


def _declare(reset_counter=None):
    @hookimpl
    def foxhunt_declare(registrar):
        registrar.slot(COUNTER, doc="launches this fold")
        registrar.state(COUNTER, ResetCategory.FOLD_RESET, reset=reset_counter)
        registrar.slot(TOTAL, doc="launches this run")
        registrar.state(TOTAL, ResetCategory.TRAINING_PERSIST)
        registrar.slot(LEVEL, init=1.0, doc="a soft-reset level")
        registrar.state(LEVEL, ResetCategory.SOFT_RESET, decay_steps=10)
        registrar.state(MONITOR_STATE_PREFIX + "toy", ResetCategory.FOLD_RESET, reset=reset_monitor)

    return foxhunt_declare


def _count(context) -> None:
    for name in (COUNTER, TOTAL):
        context.isv_slot(name).add_(1.0)
    context.isv_slot(LEVEL).mul_(0.5)


def _kernels(run=_count, writes=(COUNTER, TOTAL, LEVEL)):
    @hookimpl
    def foxhunt_kernels(config):
        return [Kernel(name="toy.count", point=KernelPoint.STEP, run=run, description="counts launches", writes=writes)]

    return foxhunt_kernels


class ToyMonitor(AdaptiveMonitor):
    name = "toy"
    reads = (COUNTER, TOTAL)


def _monitors(monitor_type=ToyMonitor):
    @hookimpl
    def foxhunt_monitors(config):
        return [monitor_type()]

    return foxhunt_monitors


def good_plugin() -> types.ModuleType:
    """Declares a fold-reset, a persist and a soft-reset slot, a STEP kernel writing them, a monitor reading them."""
    return _module("toy_plugin", foxhunt_declare=_declare(), foxhunt_kernels=_kernels(), foxhunt_monitors=_monitors())


def slot_without_reset_entry() -> types.ModuleType:
    @hookimpl
    def foxhunt_declare(registrar):
        registrar.slot("toy.orphan", doc="a slot nobody resets")

    return _module("toy_orphan_slot", foxhunt_declare=foxhunt_declare)


def misspelled_hook() -> types.ModuleType:
    def foxhunt_delcare(registrar):
        registrar.slot(COUNTER)

    return _module("toy_misspelled", foxhunt_delcare=hookimpl(foxhunt_delcare))


def stray_kernel_write() -> types.ModuleType:
    """Its kernel writes TOTAL, but says it writes only COUNTER."""
    return _module("toy_stray", foxhunt_declare=_declare(), foxhunt_kernels=_kernels(writes=(COUNTER,)),
                   foxhunt_monitors=_monitors())


class _SneakyMonitor(ToyMonitor):
    """Writes the live ISV through a tensor it kept (the read-only snapshot cannot stop that; the kit must)."""

    live: torch.Tensor | None = None

    def observe(self, view, signals=None):
        if _SneakyMonitor.live is not None:
            _SneakyMonitor.live.add_(1.0)
        super().observe(view, signals)


def writing_monitor() -> types.ModuleType:
    def keep_live_isv(context) -> None:
        _SneakyMonitor.live = context.isv_slot(COUNTER)
        _count(context)

    return _module("toy_writer", foxhunt_declare=_declare(), foxhunt_kernels=_kernels(run=keep_live_isv),
                   foxhunt_monitors=_monitors(_SneakyMonitor))


def reset_that_forgets() -> types.ModuleType:
    """Its fold-reset dispatch for COUNTER writes 5 instead of the declared init 0."""
    return _module("toy_forgets", foxhunt_declare=_declare(reset_counter=lambda isv: isv.write(COUNTER, 5.0)),
                   foxhunt_kernels=_kernels(), foxhunt_monitors=_monitors())


def reset_that_touches_persist() -> types.ModuleType:
    """Its fold-reset dispatch for COUNTER also clears the training-persist TOTAL."""

    def reset(isv) -> None:
        isv.reset_slot(COUNTER)
        isv.reset_slot(TOTAL)

    return _module("toy_touches", foxhunt_declare=_declare(reset_counter=reset), foxhunt_kernels=_kernels(),
                   foxhunt_monitors=_monitors())


def window_reset_that_forgets() -> types.ModuleType:
    """A window-reset slot whose dispatch writes 5 instead of the declared init 0."""

    @hookimpl
    def foxhunt_declare(registrar):
        registrar.slot("toy.window", doc="a per-window value")
        registrar.state("toy.window", ResetCategory.WINDOW_RESET, reset=lambda isv: isv.write("toy.window", 5.0))

    return _module("toy_window_forgets", foxhunt_declare=foxhunt_declare)
