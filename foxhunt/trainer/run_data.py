"""A run's data: the market, its causal features and the walk-forward folds, and a fold's normalised view.

The trainer, the gym environments and the tests all start from :func:`prepare_data`, so a market refused for
its folds names the feature set whose warm-up left no room, wherever it is loaded.
"""

from __future__ import annotations

import attrs
import numpy as np

from foxhunt.config import FoxhuntConfig
from foxhunt.data import MarketData, load_from_config
from foxhunt.errors import DataError
from foxhunt.features import FEATURE_SETS, FeatureMatrix, FeatureTable, Normalizer, compute_features
from foxhunt.folds import Fold, FoldConfig, bars_needed, make_folds
from foxhunt.plugin.host import config_feature_table

__all__ = ["PreparedData", "prepare_data", "normalised_features"]


@attrs.frozen
class PreparedData:
    """Market, raw causal features and the walk-forward folds of one run."""

    market: MarketData
    features: FeatureMatrix
    folds: list[Fold]


def prepare_data(config: FoxhuntConfig, market: MarketData | None = None, table: FeatureTable | None = None) -> PreparedData:
    """Market (``market``, else loaded from ``config.data``), its cached causal features and the folds.

    ``table``: the run's feature table (the host's, with its feature plugins' families); None: the one
    ``config``'s plugins give (:func:`foxhunt.plugin.host.config_feature_table`)."""
    table = config_feature_table(config) if table is None else table
    market = load_from_config(config.data) if market is None else market
    features = compute_features(market, config.features.resolve_set(table), config.features.make_cache(), table)
    try:
        folds = make_folds(len(market), config.folds, warmup=features.warmup)
    except DataError as error:
        # the warm-up is the inputs' longest window: name the set, and the built-in sets that leave room
        fits = _sets_that_fit(market, config.folds, table)
        fitting = ", ".join(f"{name!r} (warm-up {warmup})" for name, warmup in fits)
        way_out = (f"built-in sets that fit: {fitting} (--set 'features.feature_set=\"NAME\"')" if fitting
                   else "no built-in set leaves room for these folds")
        raise DataError(f"{market.source}: {error}. The warm-up comes from feature set "
                        f"{features.feature_set.name!r} (its longest window); {way_out}") from None
    return PreparedData(market, features, folds)


def _sets_that_fit(market: MarketData, folds: FoldConfig, table: FeatureTable) -> list[tuple[str, int]]:
    """The core's feature sets whose warm-up leaves room for ``folds`` on ``market``, with their warm-ups (computed,
    not cached: only a refused run asks)."""
    fitting = []
    for name in FEATURE_SETS:
        try:
            warmup = compute_features(market, name, None, table).warmup
        except DataError:  # a set this market cannot compute: book features without a book, or too few bars
            continue
        if bars_needed(folds, warmup) <= len(market):
            fitting.append((name, warmup))
    return fitting


def normalised_features(features: FeatureMatrix, fold: Fold, clip: float | None) -> tuple[np.ndarray, Normalizer]:
    """Features normalised with statistics of the fold's training bars only; warm-up rows zeroed (never used)."""
    normalizer = Normalizer.fit(features.values, fold.train_slice, clip=clip)
    values = np.array(normalizer.apply(features.values), dtype=np.float32)
    values[: features.warmup] = 0.0
    return values, normalizer
