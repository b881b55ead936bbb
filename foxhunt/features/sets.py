"""Named, versioned feature sets: the feature table's column order.

The version is part of the cache key. Bump a built-in set's version when its
names change; bump :data:`FEATURE_CODE_VERSION` when any formula changes, which
invalidates every cached matrix at once.

A set checks its names' shape when it is made: a core family's name must have
the right parameters; a base the core does not know may be a feature plugin's
and is checked against the run's table (:mod:`foxhunt.features.table`) before
anything is computed.
"""

from __future__ import annotations

import attrs

from foxhunt.errors import DataError
from foxhunt.features.library import known_shape

__all__ = ["FEATURE_CODE_VERSION", "FeatureSet", "FEATURE_SETS", "feature_set"]

FEATURE_CODE_VERSION = "1"


def _valid_names(instance: object, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    if not value:
        raise DataError("a feature set needs at least one feature name")
    duplicated = sorted({name for name in value if value.count(name) > 1})
    if duplicated:
        raise DataError(f"feature set lists {duplicated} more than once; each column name must be unique")
    for name in value:
        known_shape(name)


@attrs.frozen
class FeatureSet:
    """Ordered feature names (column order of the matrix) and a version for the cache key."""

    name: str
    version: str
    names: tuple[str, ...] = attrs.field(converter=tuple, validator=_valid_names)

    def index(self, feature: str) -> int:
        """Column of ``feature`` in matrices computed from this set."""
        try:
            return self.names.index(feature)
        except ValueError:
            raise KeyError(f"feature {feature!r} is not in set {self.name!r}: {list(self.names)}") from None


# The default is `horizons`: `minimal`'s six inputs plus a 32-bar momentum and a 64-bar Bollinger position, the
# horizons of the slower markets (trend regimes of about 200 bars, mean reversion with a half-life of about 70).
# With a fold's 2,000 training bars every input that carries no signal is one more way to fit the window's
# noise, so the set stays small; with the replay's counterfactual mirror it learnt better than `minimal` on
# AR(1), the trend and the random walk, not on mean reversion (docs/learner.md, "The counterfactual mirror").
# `horizons256` swaps the Bollinger window for 256 bars: on the mean-reversion market its correlation with the
# conditional mean of the next return is -0.72 against -0.41 for 64 bars (0.89 against 0.91 on the trend), and
# beside the execution credit it lifted mean reversion (docs/learner.md, "Execution credit and a 256-bar level").
# `horizons512` adds a 512-bar Bollinger position to it (correlation -0.84 on mean reversion): it is both profiles'
# set, measured over fifteen seeds on each device (docs/learner.md, "Both profiles take the 512-bar level"); its
# warm-up is 512 bars, so a short file names `horizons` (64). `horizons_ew` adds instead an exponentially weighted
# 256-bar level (`ewz_256`, which follows mean reversion's level closer than either window: a threshold rule on it
# reaches 0.73 of that oracle against 0.41 for boll_256), a named choice (docs/learner.md, "An exponentially
# weighted level").
_MINIMAL_FEATURES = ("ret_1", "ret_4", "ret_16", "rvol_16", "mom_8", "rsi_14")
_OHLCV_FEATURES = (
    "ret_1", "ret_4", "ret_16", "ret_64",
    "rvol_16", "rvol_64",
    "mom_8", "mom_32",
    "rsi_14",
    "macd_12_26", "macdh_12_26_9",
    "boll_20",
    "ma_ratio_10_50",
    "slope_20",
    "cusum_32",
    "volz_32",
    "tod_sin", "tod_cos", "dow_sin", "dow_cos",
)  # fmt: skip

FEATURE_SETS: dict[str, FeatureSet] = {
    fs.name: fs
    for fs in (
        FeatureSet("ohlcv", "1", _OHLCV_FEATURES),
        FeatureSet("minimal", "1", _MINIMAL_FEATURES),
        FeatureSet("horizons", "1", (*_MINIMAL_FEATURES, "mom_32", "boll_64")),
        FeatureSet("horizons256", "1", (*_MINIMAL_FEATURES, "mom_32", "boll_256")),
        FeatureSet("horizons512", "1", (*_MINIMAL_FEATURES, "mom_32", "boll_256", "boll_512")),
        FeatureSet("horizons_ew", "1", (*_MINIMAL_FEATURES, "mom_32", "boll_256", "ewz_256")),
        FeatureSet(
            "book",
            "1",
            (*_OHLCV_FEATURES, "spread_bps", "book_pressure", "depth_imbalance", "ofi_16", "trade_imbalance_16"),
        ),
    )
}


def feature_set(name: str, names: tuple[str, ...] = ()) -> FeatureSet:
    """A built-in set by name, or (when ``names`` is given) a custom set of those names.

    The core's sets only; :meth:`foxhunt.features.table.FeatureTable.resolve` knows the plugins' too."""
    if names:
        return FeatureSet(name or "custom", f"custom-{FEATURE_CODE_VERSION}", names)
    try:
        return FEATURE_SETS[name]
    except KeyError:
        raise DataError(f"unknown feature set {name!r}; built-in sets: {', '.join(FEATURE_SETS)}, or list names explicitly") from None
