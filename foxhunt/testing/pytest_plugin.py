"""The pytest plugin of the authoring kit (entry point ``pytest11: foxhunt``).

Fixtures:

- ``plugin_host``: a fresh :class:`~foxhunt.plugin.host.PluginHost` with discovery
  off: only the core's own declarations are on it, so installed plugins cannot
  change what a test sees;
- ``add_plugin``: ``add_plugin(plugin, name=None)`` puts one plugin on that host
  (named after its module when ``name`` is left out) and returns the host.

Then ``plugin_host.declare()`` and ``plugin_host.freeze()`` as in a run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["plugin_host", "add_plugin"]


@pytest.fixture
def plugin_host() -> Any:
    """A plugin host with discovery off (the core only)."""
    from foxhunt.testing.hosts import make_host  # imported here: see foxhunt.testing's docstring

    return make_host()


@pytest.fixture
def add_plugin(plugin_host: Any) -> Callable[..., Any]:
    """``add_plugin(plugin, name=None)``: register one plugin on ``plugin_host``; returns the host."""
    from foxhunt.testing.hosts import plugin_origin

    def add(plugin: Any, name: str | None = None) -> Any:
        distribution, version = plugin_origin(plugin)
        plugin_name = name or getattr(plugin, "__name__", type(plugin).__name__).rsplit(".", 1)[-1]
        plugin_host.add_plugin(plugin, plugin_name, distribution=distribution, version=version)
        return plugin_host

    return add
