"""Compute (or fetch from the cache) the feature matrix of a market for a feature set."""

from __future__ import annotations

import attrs
import numpy as np
import structlog

from foxhunt.data.market import MarketData
from foxhunt.errors import DataError
from foxhunt.features.cache import FeatureCache, cache_key
from foxhunt.features.library import feature_values
from foxhunt.features.sets import FEATURE_CODE_VERSION, FeatureSet
from foxhunt.features.table import CORE_TABLE, FeatureTable

__all__ = ["FeatureMatrix", "compute_features"]

log = structlog.get_logger(__name__)


def _readonly_float32(value: np.ndarray) -> np.ndarray:
    array = np.array(value, dtype=np.float32, order="C", copy=True)
    array.flags.writeable = False
    return array


@attrs.frozen(eq=False)
class FeatureMatrix:
    """``values`` is ``[bars, features]`` float32 in ``names`` order, read-only.

    Rows before ``warmup`` may hold NaN; every row from ``warmup`` on is finite.
    ``from_cache`` says whether this matrix was read from the on-disk cache.
    ``parity``: -1.0 for each odd column, +1.0 for each even one (the features' mirror parity, from the
    run's feature table: a plugin family's declared parity included).
    """

    values: np.ndarray = attrs.field(converter=_readonly_float32)
    names: tuple[str, ...]
    warmup: int
    feature_set: FeatureSet
    data_hash: str
    from_cache: bool = False
    parity: tuple[float, ...] = ()
    groups: tuple[str, ...] = ()  # each column's feature group (FeatureGroup, lower case), from the run's table

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def index(self, name: str) -> int:
        """Column of a feature (the names tuple is the table's definition site)."""
        return self.feature_set.index(name)

    def column(self, name: str) -> np.ndarray:
        return self.values[:, self.index(name)]


def _compute(market: MarketData, fs: FeatureSet, table: FeatureTable) -> tuple[np.ndarray, int]:
    values = np.empty((len(market), len(fs.names)), dtype=np.float64)
    warmup = 0
    for column, name in enumerate(fs.names):
        values[:, column], feature_warmup = feature_values(market, name, table.families)
        warmup = max(warmup, feature_warmup)
    if warmup >= len(market):
        raise DataError(
            f"{market.source}: feature set {fs.name!r} needs {warmup + 1} bars before its first defined row, "
            f"the data has {len(market)}. Load more bars or choose shorter feature windows"
        )
    bad = np.argwhere(~np.isfinite(values[warmup:]))
    if bad.size:
        row, column = int(bad[0][0]) + warmup, int(bad[0][1])
        raise DataError(
            f"{market.source}: bar {row + 1} ({market.timestamps[row]}), feature {fs.names[column]!r}: value is not finite "
            "after the warm-up. The bars around it are degenerate; check the data there"
        )
    return values, warmup


def compute_features(
    market: MarketData,
    features: FeatureSet | str = "horizons",
    cache: FeatureCache | None = None,
    table: FeatureTable | None = None,
) -> FeatureMatrix:
    """The causal feature matrix of ``market`` (a value at bar t uses bars <= t only).

    ``table``: the run's feature families and sets, the loaded feature plugins' among them
    (:meth:`foxhunt.plugin.host.PluginHost.feature_table`); None for the core's alone.
    With a ``cache``, the matrix is read from it when the data hash, the set's
    name, version and names, the feature code version, and the owner and version
    of each plugin family used all match, and written to it otherwise.
    """
    table = CORE_TABLE if table is None else table
    fs = table.resolve(features) if isinstance(features, str) else features
    data_hash = market.content_hash()
    key = cache_key(data_hash, fs.name, fs.version, fs.names, FEATURE_CODE_VERSION, table.key_parts(fs.names))
    parity, groups = table.parity(fs.names), table.groups(fs.names)
    if cache is not None:
        cached = cache.get(key, fs.names)
        if cached is not None:
            values, warmup = cached
            return FeatureMatrix(values, fs.names, warmup, fs, data_hash, from_cache=True, parity=parity,
                                 groups=groups)
    values, warmup = _compute(market, fs, table)
    matrix = FeatureMatrix(values, fs.names, warmup, fs, data_hash, parity=parity, groups=groups)
    if cache is not None:
        path = cache.put(key, matrix.values, fs.names, warmup)
        if path is not None:  # None: larger than the cache's whole limit, not kept (put says so)
            log.debug("feature_cache_write", path=str(path), features=len(fs.names), bars=len(market))
    return matrix
