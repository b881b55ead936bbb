"""Causal features: causality property, warm-up, formulas on known inputs, book and flow features."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data import BOOK, FLOW, OHLCV, MarketData, load, preset
from foxhunt.errors import DataError
from foxhunt.features import FEATURE_SETS, FeatureSet, FeatureTable, compute_features, parse_feature
from foxhunt.features.library import feature_values
from foxhunt_plugins import book_features
from market_builders import with_book

BASE = load("synthetic:regime?bars=300&seed=11")
# the core's table with the built-in feature plugin's families and its book_full set
PLUGIN_TABLE, _ = FeatureTable.compose([("book_features", f) for f in book_features.FAMILIES],
                                       [("book_features", book_features.BOOK_FULL)])


BOOK_MARKET = with_book(BASE, 0)


def perturbed_after(market: MarketData, t: int, seed: int) -> MarketData:
    """Same bars up to t; every later bar's prices, volume, book, levels and flow changed (bars stay valid)."""
    rng = np.random.default_rng(seed)
    later = len(market) - t - 1
    scale = np.exp(rng.normal(0, 0.05, later))[:, None]
    ohlcv = market.ohlcv.copy()
    ohlcv[t + 1:, : OHLCV.VOLUME] *= scale  # one factor per bar keeps high >= open, close >= low
    ohlcv[t + 1:, OHLCV.VOLUME] = rng.integers(0, 10_000, later)
    book = None if market.book is None else market.book.copy()
    flow = None if market.flow is None else market.flow.copy()
    levels = None if market.levels is None else market.levels.copy()
    if book is not None:
        book[t + 1:] *= rng.uniform(0.5, 2.0, (later, BOOK.size()))
        flow[t + 1:] *= rng.uniform(0.5, 2.0, (later, FLOW.size()))
        levels[t + 1:] *= rng.uniform(0.5, 2.0, levels[t + 1:].shape)
    return MarketData(market.source, market.timestamps, ohlcv, market.instrument, market.report, book, flow, levels)


@settings(max_examples=40)
@given(t=st.integers(0, len(BASE) - 2), seed=st.integers(0, 2**32 - 1),
       features=st.sampled_from(["ohlcv", "horizons_ew", "book", "book_full"]))
def test_perturbing_bars_after_t_leaves_features_up_to_t_unchanged(t, seed, features):
    # book_full: every family of the built-in feature plugin (foxhunt_plugins/book_features.py) too
    market = BASE if features in ("ohlcv", "horizons_ew") else BOOK_MARKET
    original = compute_features(market, features, table=PLUGIN_TABLE).values
    changed = compute_features(perturbed_after(market, t, seed), features, table=PLUGIN_TABLE).values
    np.testing.assert_array_equal(original[: t + 1], changed[: t + 1])  # bit-identical, NaN included
    assert not np.array_equal(original[t + 1:], changed[t + 1:])  # the perturbation did reach the features


@pytest.mark.parametrize("name", book_features.BOOK_FULL.names)
def test_each_feature_is_nan_exactly_before_its_warmup(name):
    values, warmup = feature_values(BOOK_MARKET, name, PLUGIN_TABLE.families)
    assert np.isnan(values[:warmup]).all()
    assert np.isfinite(values[warmup:]).all()


def test_formulas_on_known_inputs():
    close = np.array([100.0, 101.0, 99.0, 102.0, 102.0, 104.0])
    n = close.size
    ohlcv = np.column_stack([close, close * 1.01, close * 0.99, close, np.arange(1.0, n + 1)])
    stamps = np.datetime64("2024-01-01T06:00", "ns") + np.arange(n) * np.timedelta64(6, "h")
    market = MarketData("known", stamps, ohlcv, preset("EQUITY"))
    ret2, warm = feature_values(market, "ret_2")
    assert warm == 2 and ret2[4] == pytest.approx(np.log(102 / 99))
    rvol, _ = feature_values(market, "rvol_2")
    r = np.diff(np.log(close))
    assert rvol[3] == pytest.approx(np.sqrt((r[1] ** 2 + r[2] ** 2) / 2))
    rsi, _ = feature_values(market, "rsi_2")
    gain, loss = (1 + 0) / 2, (0 + 2) / 2  # first two changes +1, -2
    assert rsi[2] == pytest.approx((gain - loss) / (gain + loss))
    gain, loss = (gain + 3) / 2, loss / 2
    assert rsi[3] == pytest.approx((gain - loss) / (gain + loss))
    boll, _ = feature_values(market, "boll_3")
    window = close[1:4]
    assert boll[3] == pytest.approx((close[3] - window.mean()) / (2 * window.std()))
    slope, _ = feature_values(market, "slope_3")
    assert slope[5] == pytest.approx(np.polyfit(np.arange(3), np.log(close[3:6]), 1)[0])
    ma, _ = feature_values(market, "ma_ratio_2_3")
    assert ma[4] == pytest.approx(np.log(close[3:5].mean() / close[2:5].mean()))
    tod, _ = feature_values(market, "tod_sin")
    assert tod[0] == pytest.approx(1.0)  # 06:00 is a quarter of the day
    dow, _ = feature_values(market, "dow_cos")
    assert dow[0] == pytest.approx(np.cos(2 * np.pi * 0.25 / 7))  # 2024-01-01 is a Monday
    volz, _ = feature_values(market, "volz_3")
    logs = np.log1p(np.array([3.0, 4.0, 5.0]))
    assert volz[4] == pytest.approx((logs[-1] - logs.mean()) / logs.std())


def _explicit_ewz(log_close: np.ndarray, t: int, span: int) -> float:
    """ewz at bar t from its definition: the first bar weighs (1 - a)^t and bar i >= 1 weighs a (1 - a)^(t - i)."""
    alpha = 2.0 / (span + 1.0)
    weights = alpha * (1.0 - alpha) ** (t - np.arange(t + 1.0))
    weights[0] = (1.0 - alpha) ** t
    window = log_close[: t + 1]
    mean = weights @ window
    return (log_close[t] - mean) / np.sqrt(weights @ (window - mean) ** 2)


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), span=st.integers(2, 40), bars=st.integers(45, 120))
def test_ewz_matches_explicit_exponential_weights(seed, span, bars):
    rng = np.random.default_rng(seed)
    close = 50.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, bars)))
    ohlcv = np.column_stack([close, close * 1.001, close * 0.999, close, np.ones(bars)])
    stamps = np.datetime64("2024-01-01", "ns") + np.arange(bars) * np.timedelta64(1, "h")
    values, warmup = feature_values(MarketData("walk", stamps, ohlcv, preset("EQUITY")), f"ewz_{span}")
    assert warmup == span and np.isnan(values[:span]).all()
    expected = [_explicit_ewz(np.log(close), t, span) for t in range(span, bars)]
    np.testing.assert_allclose(values[span:], expected, rtol=1e-9, atol=1e-12)


def test_flat_prices_give_zero_not_nan():
    n = 80
    ohlcv = np.tile([10.0, 10.0, 10.0, 10.0, 0.0], (n, 1))
    stamps = np.datetime64("2024-01-01", "ns") + np.arange(n) * np.timedelta64(1, "h")
    features = compute_features(MarketData("flat", stamps, ohlcv, preset("EQUITY")))
    assert np.isfinite(features.values[features.warmup:]).all()
    ewz, warmup = feature_values(MarketData("flat", stamps, ohlcv, preset("EQUITY")), "ewz_16")
    assert (ewz[warmup:] == 0.0).all()  # no deviation and no spread: no signal


def test_book_features_need_book_data_and_names_are_checked():
    with pytest.raises(DataError, match="needs MBP-10 book data"):
        compute_features(BASE, "book")
    with pytest.raises(DataError, match="unknown feature"):
        parse_feature("wiggle_3")
    with pytest.raises(DataError, match="takes 2 positive integer"):
        parse_feature("ma_ratio_10")
    with pytest.raises(DataError, match="more than once"):
        FeatureSet("twice", "1", ("ret_1", "ret_1"))
    with pytest.raises(DataError, match="needs 65 bars"):
        compute_features(BASE.slice(0, 60), "ohlcv")


def test_matrix_is_named_read_only_float32():
    features = compute_features(BOOK_MARKET, "book")
    assert features.values.dtype == np.float32 and not features.values.flags.writeable
    assert features.names == FEATURE_SETS["book"].names
    np.testing.assert_array_equal(features.column("spread_bps"), features.values[:, features.index("spread_bps")])
    assert features.warmup == 64
