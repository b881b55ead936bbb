"""``[plugins]``: which plugins a run uses, and each plugin's own settings section.

The section holds three selection keys (``only``, ``disable``, ``require``)
and one table per configured plugin, ``[plugins.<name>]``. Every installed
plugin is loaded unless ``disable`` names it; ``only`` narrows the run to
exactly the plugins it names. There is no key that switches a plugin *on*: a
plugin whose components join a run only when asked (an opt-in loss, say)
declares an ``enabled`` setting, so it is switched on by
``[plugins.<name>] enabled = true`` (docs/plugins.md, "Selecting plugins"). The core does not
know what a plugin's table may hold: the plugin declares an attrs class with
``registrar.settings(cls)`` and the :class:`~foxhunt.plugin.host.PluginHost`
structures the table with it while the plugin declares (docs/plugins.md,
"Settings"). Until then a table is kept as the plain data the user wrote, so a
run's ``config.toml`` and its checkpoints record exactly what was set.

:data:`MOVED_KEYS` lists the keys that the core config owned before the
plugins did; a config that still sets one is refused with the key to use,
except in a checkpoint foxhunt saved itself (:func:`migrate_saved`). The
selection key ``enable`` is one of them: it meant "only these plugins", which a
reader took for "these too"; it is now ``only`` (an empty ``enable = []``, what
every run wrote before, is still read as the nothing-narrowed default).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from foxhunt.config_loading import MovedKey, converter, deep_copy

__all__ = ["SELECTION_KEYS", "RETIRED_SELECTION_KEY", "PluginSelection", "MOVED_KEYS", "moved_keys", "migrate_saved"]

SELECTION_KEYS = ("only", "disable", "require")
RETIRED_SELECTION_KEY = "enable"  # read only empty (every run wrote `enable = []`); otherwise a moved key


def _name_list(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _valid_specifiers(instance: Any, attribute: attrs.Attribute, value: dict[str, str]) -> None:
    for name, spec in value.items():
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            # The attribute travels with the error so config messages name the key path (plugins.require).
            raise ValueError(f"plugin {name!r}: {spec!r} is not a version specifier (e.g. '>=0.2,<1')", attribute) from None


def _sections(value: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(name): _plain(section) for name, section in dict(value).items()}


def _plain(section: Any) -> dict[str, Any]:
    if not isinstance(section, Mapping):
        raise TypeError(f"a plugin's settings section must be a table, got {type(section).__name__} {section!r}")
    return {str(key): _plain(item) if isinstance(item, Mapping) else item for key, item in section.items()}


@attrs.frozen
class PluginSelection:
    """``[plugins]`` config: which plugins a run uses, and the settings sections given to them.

    Every discovered plugin is loaded unless ``disable`` names it. ``only``,
    when not empty, narrows the run to exactly the plugins it names (a required
    one is loaded too; the core always is). ``require`` maps plugin names to version
    specifiers; a required plugin that is missing or of another version stops the run.
    ``settings`` maps a plugin name to its ``[plugins.<name>]`` table as written
    (structured by the plugin's declared class when the plugin declares);
    ``profile_settings`` holds the run-size profile's values beneath them.
    """

    only: tuple[str, ...] = attrs.field(default=(), converter=_name_list)
    disable: tuple[str, ...] = attrs.field(default=(), converter=_name_list)
    require: dict[str, str] = attrs.field(factory=dict, validator=_valid_specifiers)
    settings: dict[str, dict[str, Any]] = attrs.field(factory=dict, converter=_sections)
    # The run-size profile's values for plugin settings (foxhunt.profiles.plugin_defaults): under ``settings``
    # for a plugin that is loaded, ignored for one that is not. Not written back: the profile is ``run.profile``.
    profile_settings: dict[str, dict[str, Any]] = attrs.field(factory=dict, converter=_sections, eq=False)

    def selects(self, name: str) -> bool:
        if name in self.disable:
            return False
        return not self.only or name in self.only or name in self.require


_structure_selection_keys = make_dict_structure_fn(PluginSelection, converter)


def _structure_selection(data: Any, _: type) -> PluginSelection:
    """``[plugins]`` -> :class:`PluginSelection`: the selection keys, then every table is a plugin's section."""
    if not isinstance(data, Mapping):
        raise TypeError(f"expected a table, got {type(data).__name__} {data!r}")
    unknown = {key for key, value in data.items() if key not in SELECTION_KEYS and not isinstance(value, Mapping)
               and not (key == RETIRED_SELECTION_KEY and value == [])}
    if unknown:
        raise ForbiddenExtraKeysError("", PluginSelection, unknown)
    keys = {key: data[key] for key in SELECTION_KEYS if key in data}
    # an empty `enable` (what every run wrote before `only`) narrows nothing; a non-empty one is a moved key
    sections = {key: value for key, value in data.items() if key not in (*SELECTION_KEYS, RETIRED_SELECTION_KEY)}
    return _structure_selection_keys({**keys, "settings": sections}, PluginSelection)


def _unstructure_selection(selection: PluginSelection) -> dict[str, Any]:
    return {
        "only": list(selection.only),
        "disable": list(selection.disable),
        "require": dict(selection.require),
        **{name: _plain(section) for name, section in selection.settings.items()},
    }


converter.register_structure_hook(PluginSelection, _structure_selection)
converter.register_unstructure_hook(PluginSelection, _unstructure_selection)


# Keys the core config owned before the plugin that uses them did: old key path (or section) -> new one.
MOVED_KEYS: tuple[MovedKey, ...] = (
    MovedKey("learner.kappa", "plugins.iqn.kappa", "the iqn loss plugin owns its quantile-Huber threshold"),
    MovedKey("learner.label_smoothing_max", "plugins.c51.label_smoothing_max", "the c51 loss plugin owns its label smoothing"),
    MovedKey("learner.ensemble_diversity", "plugins.ensemble.diversity", "the ensemble loss plugin owns its diversity weight"),
    MovedKey("learner.cql_alpha", "plugins.static.cql_alpha",
             "the static plugin owns the cql.alpha ISV slot the cql loss reads; it was also the key that won "
             "when both were set"),
    MovedKey("learner.replay.mirror", "plugins.mirror.enabled",
             "the counterfactual mirror is a replay-augmentation plugin, mirror, that owns its switch"),
    MovedKey("learner.replay.mirror_fraction", "plugins.mirror.fraction",
             "the mirror replay-augmentation plugin owns the share of each batch it mirrors"),
    MovedKey("adaptive", "plugins", "each adaptive plugin owns its settings: [adaptive.NAME] is now [plugins.NAME]"),
    MovedKey("plugins.enable", "plugins.only",
             "`enable` always meant 'only these plugins'; every installed plugin is loaded unless disabled, and an "
             "opt-in plugin's components are switched on by its own setting, plugins.<name>.enabled = true"),
)


def _leaves(data: Mapping[str, Any]) -> Iterator[str]:
    """Dotted paths of every value and empty table; a loop, not recursion: a file may nest tables thousands deep."""
    pending = [("", data)]
    while pending:
        prefix, table = pending.pop()
        for key, value in table.items():
            path = f"{prefix}{key}"
            if isinstance(value, Mapping) and value:
                pending.append((path + ".", value))
            else:
                yield path


def moved_keys(data: Mapping[str, Any], table: Iterable[MovedKey] = MOVED_KEYS) -> list[MovedKey]:
    """Every key of ``data`` (plain config data) that ``table`` says has moved, each with its own new path."""
    found = []
    for path in _leaves(data):
        if path == "plugins." + RETIRED_SELECTION_KEY and not data["plugins"][RETIRED_SELECTION_KEY]:
            continue  # `enable = []`, what every run wrote before `only`: it narrowed nothing
        for rule in table:
            if path == rule.old or path.startswith(rule.old + "."):
                found.append(MovedKey(path, rule.new + path[len(rule.old):], rule.why))
                break
    return found


def migrate_saved(data: Any) -> Any:
    """A config saved before plugins owned their settings, with each moved key at its new place.

    For configs foxhunt wrote itself (a checkpoint's metadata), so that ``foxhunt backtest``
    reads a checkpoint made before the move; a config a user writes with an old key is
    refused instead, naming the new one. Where two old keys land on one new key
    (``learner.cql_alpha`` and ``adaptive.static.cql_alpha``) the ``[adaptive]`` one wins,
    as it did at run time. A table for a plugin the saved ``[plugins]`` does not select is
    dropped (a saved config holds every section, used or not). A saved ``[plugins] enable``
    is read as ``only``, which is what it meant.
    """
    data = _renamed_selection(data)
    moves = moved_keys(data) if isinstance(data, Mapping) else []
    if not moves:
        return data
    result = deep_copy(data)
    for move in moves:
        _remove(result, move.old.split("."))
    plugins = result.setdefault("plugins", {})
    if not isinstance(plugins, dict):
        return result  # not a table: structuring names the fault
    try:
        selection = PluginSelection(**{key: plugins[key] for key in SELECTION_KEYS if key in plugins})
    except (TypeError, ValueError):
        return result  # an invalid [plugins]: structuring names the fault
    for move in sorted(moves, key=lambda m: m.old.startswith("adaptive.")):
        parts = move.new.split(".")
        if len(parts) < 3 or not selection.selects(parts[1]):
            continue  # an empty old table, or a plugin the run did not load
        name, keys = parts[1], parts[2:]
        table = plugins.setdefault(name, {})
        for key in keys[:-1]:
            table = table.setdefault(key, {}) if isinstance(table, dict) else table
        if isinstance(table, dict):
            table[keys[-1]] = _value(data, move.old.split("."))
    return result


def _renamed_selection(data: Any) -> Any:
    """``data`` with a saved ``[plugins] enable`` under its present name, ``only`` (the same meaning)."""
    plugins = data.get("plugins") if isinstance(data, Mapping) else None
    if not (isinstance(plugins, Mapping) and RETIRED_SELECTION_KEY in plugins):
        return data
    result = deep_copy(data)
    names = result["plugins"].pop(RETIRED_SELECTION_KEY)
    result["plugins"].setdefault("only", names)
    return result


def _value(data: Mapping[str, Any], path: list[str]) -> Any:
    for key in path:
        data = data[key]
    return data


def _remove(data: dict[str, Any], path: list[str]) -> None:
    """Delete ``path`` and every table it leaves empty."""
    parents = [data]
    for key in path[:-1]:
        parents.append(parents[-1][key])
    del parents[-1][path[-1]]
    for parent, key in zip(reversed(parents[:-1]), reversed(path[:-1]), strict=True):
        if parent[key]:
            break
        del parent[key]
