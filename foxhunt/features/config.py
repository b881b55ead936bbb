"""``[features]`` section of the run config."""

from __future__ import annotations

import attrs

from foxhunt.features.cache import MB, FeatureCache
from foxhunt.features.library import known_shape
from foxhunt.features.sets import FeatureSet
from foxhunt.features.table import CORE_TABLE, FeatureTable

__all__ = ["FeatureConfig"]


def _set_name(instance: FeatureConfig, attribute: attrs.Attribute, value: str) -> None:
    # A set the core does not know may be a feature plugin's: FeatureTable.resolve refuses it when no loaded
    # plugin provides it, before the data is touched.
    if not instance.names and not value.isidentifier():
        raise ValueError(f"feature_set {value!r} is not a set name (letters, digits and '_'); or list names explicitly")


def _known_names(instance: object, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    for name in value:
        try:
            known_shape(name)
        except Exception as error:  # known_shape raises DataError; configs report ValueError
            raise ValueError(str(error)) from None


def _positive_or_none(instance: object, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} must be > 0 or unset, got {value!r}")


@attrs.frozen
class FeatureConfig:
    """Which features, where the cache lives, and how inputs are normalised.

    ``feature_set``: a built-in set (horizons, the default; horizons256; horizons512, the profiles';
    horizons_ew; minimal; ohlcv;
    book) or a loaded feature plugin's (``book_full``, from ``book_features``). ``names``: an explicit list
    instead (a custom set named after ``feature_set``). A core family's name is checked here; a plugin's, when
    the run's feature table is known (:meth:`resolve_set`).
    ``cache_dir``: None for the default (``$FOXHUNT_CACHE_DIR/features`` or
    ``~/.cache/foxhunt/features``). ``cache``: False disables the cache.
    ``cache_max_mb``: the most the cache's entries may hold, in MiB; least
    recently used entries are deleted beyond it (None: ``$FOXHUNT_FEATURE_CACHE_MAX_MB``,
    else 2048, i.e. 2 GiB).
    ``clip``: normalised values are clipped to [-clip, clip] (None: no clip).
    """

    feature_set: str = attrs.field(default="horizons", validator=_set_name)
    names: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_known_names)
    cache_dir: str | None = None
    cache: bool = True
    cache_max_mb: int | None = attrs.field(default=None, validator=_positive_or_none)
    clip: float | None = attrs.field(default=10.0, validator=_positive_or_none)

    def resolve_set(self, table: FeatureTable | None = None) -> FeatureSet:
        """The configured set, every name checked against ``table`` (the run's; None: the core's alone)."""
        return (CORE_TABLE if table is None else table).resolve(self.feature_set, self.names)

    def make_cache(self) -> FeatureCache | None:
        if not self.cache:
            return None
        return FeatureCache(self.cache_dir, None if self.cache_max_mb is None else self.cache_max_mb * MB)
