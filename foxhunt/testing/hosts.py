"""Plugin hosts for tests: discovery off, only the core and the plugins a test adds."""

from __future__ import annotations

import importlib.metadata as metadata
import inspect
from typing import Any

from foxhunt.plugin.host import PluginHost, PluginSelection

__all__ = ["make_host", "plugin_origin"]


def plugin_origin(plugin: Any) -> tuple[str, str]:
    """``(distribution, version)`` of the installed distribution that provides ``plugin``, if any.

    Problems the host reports then name the author's distribution and version,
    as they would in a real run.
    """
    module = inspect.getmodule(plugin) if not inspect.ismodule(plugin) else plugin
    top = (getattr(module, "__name__", "") or "").split(".")[0]
    for dist in metadata.packages_distributions().get(top, ()):
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "(in-process)", "0"


def make_host(*plugins: tuple[Any, str], selection: PluginSelection | None = None) -> PluginHost:
    """A host with the core's declarations and the given ``(plugin, name)`` pairs; nothing discovered.

    ``selection`` (a config's ``plugins``) carries the ``[plugins.<name>]`` tables the plugins' settings come from.
    """
    host = PluginHost(selection)
    host.add_core()
    for plugin, name in plugins:
        distribution, version = plugin_origin(plugin)
        host.add_plugin(plugin, name, distribution=distribution, version=version)
    return host
