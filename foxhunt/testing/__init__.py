"""``foxhunt.testing``: the plugin authoring kit.

Installed with foxhunt and registered as a pytest plugin, so a plugin
repository's tests get its fixtures with no conftest:

- ``plugin_host``: a :class:`~foxhunt.plugin.host.PluginHost` with discovery off
  (only the core's own declarations), and ``add_plugin`` to put one plugin on it;
- :func:`conformance_machine`: a hypothesis rule-based state machine that runs a
  plugin through declare, freeze, training steps, fold and soft resets and a
  checkpoint round trip, checking foxhunt's invariants after every rule;
- :mod:`foxhunt.testing.learning_check`: the learning-quality test's short runs
  (``run_check(CHECKS["ar1"], seed, root, overrides)``), to see that an agent
  with a plugin loaded still finds a signal and leaves a random walk alone.

This package imports nothing heavy until used: pytest loads it in every test
session of an environment that has foxhunt, and numba must not be imported
before a conftest had its chance to switch on the CUDA simulator.
"""

from __future__ import annotations

from typing import Any

__all__ = ["conformance_machine", "check_plugin", "make_host", "ConformanceError"]

_LAZY = {
    "conformance_machine": "foxhunt.testing.conformance",
    "check_plugin": "foxhunt.testing.conformance",
    "ConformanceError": "foxhunt.testing.conformance",
    "make_host": "foxhunt.testing.hosts",
}


def __getattr__(name: str) -> Any:
    # Lazy on purpose (see the module docstring): hypothesis and torch load on first use.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'foxhunt.testing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
