"""One run's feature table: the core's families and sets plus those of the loaded feature plugins.

The core's families (:data:`foxhunt.features.library.FEATURES`) and sets
(:data:`foxhunt.features.sets.FEATURE_SETS`) are always there. A feature plugin
adds families through the ``foxhunt_features`` hook and sets through
``foxhunt_feature_sets``; the plugin host collects them
(:meth:`foxhunt.plugin.host.PluginHost.feature_table`) and composes this table,
refusing a family or a set whose name is the core's or another plugin's. The
table travels from the host to where the market's features are computed
(:func:`foxhunt.features.compute_features`), so the core never imports a plugin.

Every matrix that uses a plugin family has ``<base>=<plugin>@<version>`` in its
cache key (:meth:`FeatureTable.key_parts`): an upgraded plugin that bumps its
family's ``version`` never reads columns cached by the old one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from foxhunt.errors import DataError
from foxhunt.features.library import FEATURES, FeatureDef, parse_feature
from foxhunt.features.sets import FEATURE_CODE_VERSION, FEATURE_SETS, FeatureSet

__all__ = ["CORE_OWNER", "FeatureTable", "CORE_TABLE"]

CORE_OWNER = "foxhunt"  # the owner named for the core's own families and sets


@attrs.frozen(eq=False)
class FeatureTable:
    """Feature families and sets by name, each with the plugin that owns it (:data:`CORE_OWNER` for the core's)."""

    families: Mapping[str, FeatureDef]
    sets: Mapping[str, FeatureSet]
    owners: Mapping[str, str]  # family base -> plugin
    set_owners: Mapping[str, str]  # set name -> plugin

    @classmethod
    def compose(
        cls, families: Iterable[tuple[str, FeatureDef]] = (), sets: Iterable[tuple[str, FeatureSet]] = ()
    ) -> tuple[FeatureTable, list[tuple[str, str]]]:
        """The core's table plus ``(plugin, family)`` and ``(plugin, set)`` contributions, and the problems found
        as ``(plugin, message)``: a name that is the core's, or another plugin's (each plugin of a clash is told),
        or a plugin set naming a feature nobody provides. A refused contribution is left out of the table."""
        table_families, owners = dict(FEATURES), dict.fromkeys(FEATURES, CORE_OWNER)
        table_sets, set_owners = dict(FEATURE_SETS), dict.fromkeys(FEATURE_SETS, CORE_OWNER)
        problems: list[tuple[str, str]] = []
        for what, items, table, owner_of in (
            ("feature family", families, table_families, owners),
            ("feature set", sets, table_sets, set_owners),
        ):
            for plugin, item in items:
                first = owner_of.get(item.name)
                if first == CORE_OWNER:
                    problems.append((plugin, f"{what} {item.name!r} is the core's own (foxhunt/features); rename it"))
                elif first is not None:
                    problems.append((plugin, f"{what} {item.name!r} is already provided by plugin {first!r}; "
                                             "rename it in one of the two, or disable one of them in [plugins]"))
                    problems.append((first, f"{what} {item.name!r} is also provided by plugin {plugin!r}; "
                                            "rename it in one of the two, or disable one of them in [plugins]"))
                else:
                    table[item.name] = item
                    owner_of[item.name] = plugin
        for name, fs in table_sets.items():
            for feature in fs.names:
                try:
                    parse_feature(feature, table_families)
                except DataError as error:
                    problems.append((set_owners[name], f"feature set {name!r}: {error}"))
        return cls(table_families, table_sets, owners, set_owners), problems

    def resolve(self, name: str, names: tuple[str, ...] = ()) -> FeatureSet:
        """Set ``name`` of this table, or (when ``names`` is given) a custom set of those names; every name checked."""
        if names:
            fs = FeatureSet(name or "custom", f"custom-{FEATURE_CODE_VERSION}", names)
        elif name in self.sets:
            fs = self.sets[name]
        else:
            raise DataError(
                f"unknown feature set {name!r}; sets: {', '.join(sorted(self.sets))} (a feature plugin's sets exist "
                "only while that plugin is loaded), or list names explicitly"
            )
        for feature in fs.names:
            parse_feature(feature, self.families)
        return fs

    def owner(self, name: str) -> str:
        """The plugin whose family computes feature ``name``."""
        return self.owners[parse_feature(name, self.families)[0].base]

    def key_parts(self, names: Iterable[str]) -> tuple[str, ...]:
        """``<base>=<plugin>@<version>`` of each plugin family among ``names``, sorted (part of the cache key)."""
        parts = set()
        for name in names:
            feature, _ = parse_feature(name, self.families)
            owner = self.owners[feature.base]
            if owner != CORE_OWNER:
                parts.add(f"{feature.base}={owner}@{feature.version}")
        return tuple(sorted(parts))

    def groups(self, names: Iterable[str]) -> tuple[str, ...]:
        """The :class:`~foxhunt.contract.FeatureGroup` (lower-case name) of each feature of ``names``."""
        return tuple(parse_feature(name, self.families)[0].group for name in names)

    def parity(self, names: Iterable[str]) -> tuple[float, ...]:
        """-1.0 for each odd feature of ``names``, +1.0 for each even one (the counterfactual mirror's map)."""
        return tuple(-1.0 if parse_feature(name, self.families)[0].mirror == "odd" else 1.0 for name in names)


CORE_TABLE, _CORE_PROBLEMS = FeatureTable.compose()
if _CORE_PROBLEMS:  # the core's sets name only the core's families
    raise DataError("; ".join(message for _, message in _CORE_PROBLEMS))
