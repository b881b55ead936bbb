"""The counterfactual mirror: each feature's declared parity against the feature computed on the mirrored market,
and the observation map against normalising the mirrored market's features (a float64 reference)."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.data import BOOK, FLOW, LEVEL, OHLCV, MarketData, load
from foxhunt.env.mirror import observation_mirror
from foxhunt.env.tables import PortfolioObs
from foxhunt.features import FeatureTable, Normalizer
from foxhunt.features.library import FEATURES, feature_values, mirror_parity, parse_feature
from foxhunt_plugins import book_features
from market_builders import with_book

# the core's families and the built-in feature plugin's (foxhunt_plugins/book_features.py), each with its parity
TABLE, _ = FeatureTable.compose([("book_features", f) for f in book_features.FAMILIES])

# Features of price levels and price differences (EMAs, moving averages, Bollinger bands, Wilder's RSI of
# close-to-close changes) are odd only to first order in the moves: the mirror negates log prices, and a mean or
# a difference of prices is not that of log prices.
LEVEL_BASED = {"macd", "macdh", "boll", "ma_ratio", "rsi"}


def mirrored(market: MarketData) -> MarketData:
    """The market whose every log return is negated: p' = K^2 / p (K the first close), bids and asks swapped."""
    k2 = market.close[0] ** 2
    ohlcv = market.ohlcv.copy()
    ohlcv[:, OHLCV.OPEN] = k2 / market.ohlcv[:, OHLCV.OPEN]
    ohlcv[:, OHLCV.HIGH] = k2 / market.ohlcv[:, OHLCV.LOW]
    ohlcv[:, OHLCV.LOW] = k2 / market.ohlcv[:, OHLCV.HIGH]
    ohlcv[:, OHLCV.CLOSE] = k2 / market.ohlcv[:, OHLCV.CLOSE]
    book = market.book.copy()
    for first, second in ((BOOK.BID_SIZE, BOOK.ASK_SIZE), (BOOK.BID_DEPTH, BOOK.ASK_DEPTH)):
        book[:, first], book[:, second] = market.book[:, second], market.book[:, first]
    book[:, BOOK.BID_PRICE] = k2 / market.book[:, BOOK.ASK_PRICE]
    book[:, BOOK.ASK_PRICE] = k2 / market.book[:, BOOK.BID_PRICE]
    book[:, BOOK.OFI] = -market.book[:, BOOK.OFI]
    flow = market.flow.copy()
    flow[:, FLOW.BUY_VOLUME], flow[:, FLOW.SELL_VOLUME] = market.flow[:, FLOW.SELL_VOLUME], market.flow[:, FLOW.BUY_VOLUME]
    levels = market.levels.copy()
    levels[:, :, LEVEL.BID_PRICE] = k2 / market.levels[:, :, LEVEL.ASK_PRICE]
    levels[:, :, LEVEL.ASK_PRICE] = k2 / market.levels[:, :, LEVEL.BID_PRICE]
    levels[:, :, LEVEL.BID_SIZE] = market.levels[:, :, LEVEL.ASK_SIZE]
    levels[:, :, LEVEL.ASK_SIZE] = market.levels[:, :, LEVEL.BID_SIZE]
    return MarketData(market.source, market.timestamps, ohlcv, market.instrument, market.report, book, flow, levels)


MARKET = with_book(load("synthetic:regime?bars=600&seed=5"), 3)
MIRROR = mirrored(MARKET)
NAMES = sorted({*book_features.BOOK_FULL.names, "slope_20", "cusum_32", "macd_12_26", "ewz_64", "mtf_ret_3_2", "mtf_rvol_5_1"})


def _base(name: str) -> str:
    return parse_feature(name, TABLE.families)[0].base


def test_every_feature_family_is_covered() -> None:
    assert {_base(name) for name in NAMES} == set(FEATURES) | {f.base for f in book_features.FAMILIES}


@pytest.mark.parametrize("name", NAMES)
def test_declared_parity_matches_the_mirrored_market(name: str) -> None:
    original, warmup = feature_values(MARKET, name, TABLE.families)
    mirror, _ = feature_values(MIRROR, name, TABLE.families)
    expected = mirror_parity(name, TABLE.families) * original[warmup:]
    if _base(name) not in FEATURES:  # a plugin family that is 0 throughout would pass with either parity
        assert np.abs(original[warmup:]).max() > 0
    if _base(name) in LEVEL_BASED:
        assert np.corrcoef(mirror[warmup:], expected)[0, 1] > 0.99
        assert np.mean(np.sign(mirror[warmup:]) == np.sign(expected)) > 0.95
    else:
        np.testing.assert_allclose(mirror[warmup:], expected, rtol=1e-9, atol=1e-9)


EXACT = ("ret_1", "ret_16", "rvol_16", "mom_8", "slope_20", "cusum_32", "volz_32", "tod_sin", "dow_cos")


@pytest.mark.parametrize("clip", [None, 1.5])
def test_observation_mirror_equals_normalising_the_mirrored_features(clip: float | None) -> None:
    raw = np.stack([feature_values(MARKET, name)[0] for name in EXACT], axis=1)[64:]
    raw_mirror = np.stack([feature_values(MIRROR, name)[0] for name in EXACT], axis=1)[64:]
    normalizer = Normalizer.fit(raw, slice(0, 300), clip=clip)
    rng = np.random.default_rng(0)
    portfolio = rng.normal(size=(raw.shape[0], len(PortfolioObs)))
    obs = np.concatenate([normalizer.apply(raw).astype(np.float64), portfolio], axis=1)
    portfolio_mirror = portfolio.copy()
    portfolio_mirror[:, PortfolioObs.POSITION] *= -1.0
    expected = np.concatenate([normalizer.apply(raw_mirror).astype(np.float64), portfolio_mirror], axis=1)
    mirror = observation_mirror(EXACT, normalizer)
    # a clipped input has lost how far out it was, so its mirror is exact only where nothing was clipped
    inside = np.ones(raw.shape[0], dtype=bool) if clip is None else np.all(
        np.abs((raw - normalizer.mean) / normalizer.std) < clip, axis=1)
    assert inside.sum() > 50
    np.testing.assert_allclose(mirror.apply(obs)[inside], expected[inside], atol=1e-5)
    assert np.all(np.abs(mirror.apply(obs)[:, : len(EXACT)]) <= (np.inf if clip is None else clip))
    if clip is None:  # unclipped, the map is its own inverse
        np.testing.assert_allclose(mirror.apply(mirror.apply(obs)), obs, atol=1e-9)


def test_a_given_parity_replaces_the_core_lookup() -> None:
    """The run's parity (a plugin family's, unknown to the core) reaches the map: odd columns are negated."""
    names = ("qdep_1", "hawkes_8")
    normalizer = Normalizer.fit(np.random.default_rng(1).normal(size=(40, 2)), slice(0, 40), clip=None)
    mirror = observation_mirror(names, normalizer, TABLE.parity(names))
    np.testing.assert_array_equal(mirror.scale[:2], [-1.0, 1.0])
    with pytest.raises(ValueError, match="1 feature parities for 2 feature names"):
        observation_mirror(names, normalizer, (1.0,))
