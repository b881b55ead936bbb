"""``[features]`` section of the run config."""

from __future__ import annotations

import attrs

from foxhunt.features.cache import MB, FeatureCache
from foxhunt.features.sets import FEATURE_SETS, FeatureSet, feature_set
from foxhunt.features.library import parse_feature

__all__ = ["FeatureConfig"]


def _known_set(instance: FeatureConfig, attribute: attrs.Attribute, value: str) -> None:
    if not instance.names and value not in FEATURE_SETS:
        raise ValueError(f"feature_set {value!r} is not built in ({', '.join(FEATURE_SETS)}); or list names explicitly")


def _known_names(instance: object, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    for name in value:
        try:
            parse_feature(name)
        except Exception as error:  # parse_feature raises DataError; configs report ValueError
            raise ValueError(str(error)) from None


def _positive_or_none(instance: object, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} must be > 0 or unset, got {value!r}")


@attrs.frozen
class FeatureConfig:
    """Which features, where the cache lives, and how inputs are normalised.

    ``feature_set``: a built-in set (horizons, the default; minimal; ohlcv; book). ``names``: an
    explicit list instead (a custom set named after ``feature_set``).
    ``cache_dir``: None for the default (``$FOXHUNT_CACHE_DIR/features`` or
    ``~/.cache/foxhunt/features``). ``cache``: False disables the cache.
    ``cache_max_mb``: the most the cache's entries may hold, in MiB; least
    recently used entries are deleted beyond it (None: ``$FOXHUNT_FEATURE_CACHE_MAX_MB``,
    else 2048, i.e. 2 GiB).
    ``clip``: normalised values are clipped to [-clip, clip] (None: no clip).
    """

    feature_set: str = attrs.field(default="horizons", validator=_known_set)
    names: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_known_names)
    cache_dir: str | None = None
    cache: bool = True
    cache_max_mb: int | None = attrs.field(default=None, validator=_positive_or_none)
    clip: float | None = attrs.field(default=10.0, validator=_positive_or_none)

    def resolve_set(self) -> FeatureSet:
        return feature_set(self.feature_set, self.names)

    def make_cache(self) -> FeatureCache | None:
        if not self.cache:
            return None
        return FeatureCache(self.cache_dir, None if self.cache_max_mb is None else self.cache_max_mb * MB)
