"""The causal feature functions and the grammar of feature names.

A feature name is a base followed by integer parameters, ``<base>_<p1>[_<p2>...]``
(``ret_16``, ``macdh_12_26_9``) or a plain base (``tod_sin``). Every function sees
the whole market but its value at bar t is computed from bars <= t only, and is
NaN before its warm-up (the first bar where it is defined). Formulas are listed in
docs/data.md; the property test in tests/features checks causality.

:data:`FEATURES` is the core's table. Feature plugins (the ``foxhunt_features`` hook) add families to the
grammar of one run: the functions here take that run's table as ``families`` (the core's when None), built
by :class:`foxhunt.features.table.FeatureTable`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
import numba
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from foxhunt.data.market import BOOK, FLOW, MarketData
from foxhunt.contract import FeatureGroup
from foxhunt.errors import DataError

__all__ = ["FEATURE_GROUPS", "FeatureDef", "FEATURES", "parse_feature", "feature_values", "mirror_parity", "known_shape"]

_DAY_S = 86_400
_CUSUM_DRIFT = 0.5  # kappa: allowance per bar, in standard deviations
_CUSUM_THRESHOLD = 5.0  # h: a side resets once it reaches h standard deviations


# The groups a feature family may name, by their lower-case names: every one but those of the columns the core
# itself adds after the features (the environment's portfolio, the learner's ISV context).
FEATURE_GROUPS: tuple[str, ...] = tuple(group.name.lower() for group in FeatureGroup
                                        if group not in (FeatureGroup.PORTFOLIO, FeatureGroup.ISV_CONTEXT))
# A family that names no group gets the one its data says: bars alone are the market, the book is the book, trades
# (with or without the book) are order flow.
_GROUP_OF_NEEDS = {"ohlcv": "market", "book": "book", "levels": "book", "flow": "order_flow", "book+flow": "order_flow"}


@attrs.frozen
class FeatureDef:
    """One feature family: how many integer parameters it takes and what data it needs."""

    base: str
    arity: int
    # "levels": each MBP-10 level at the bar close (MarketData.levels, from an mbp-10 DBN source)
    needs: str = attrs.field(validator=attrs.validators.in_(("ohlcv", "book", "flow", "book+flow", "levels")))
    compute: Callable[..., tuple[np.ndarray, int]]  # (market, *params) -> (values [bars], warm-up bar)
    description: str
    # What the feature does when the market is mirrored (every log return negated, bids and asks swapped):
    # "odd" features change sign (returns, momentum, imbalances), "even" ones are unchanged (volatility, volume,
    # calendar, spread). The counterfactual mirror of the replay (docs/learner.md) relies on it.
    mirror: str = attrs.field(default="odd", validator=attrs.validators.in_(("odd", "even")))
    # A plugin family's formula version: part of the cache key of every matrix that uses it (with the plugin's
    # name), so bump it whenever the family's values change. The core's families share FEATURE_CODE_VERSION.
    version: str = attrs.field(default="1", validator=attrs.validators.min_len(1))
    # Which FeatureGroup the family's columns belong to (one of FEATURE_GROUPS); by default the one its ``needs``
    # imply: "ohlcv" -> "market", "book"/"levels" -> "book", "flow"/"book+flow" -> "order_flow".
    group: str = attrs.field(validator=attrs.validators.in_(FEATURE_GROUPS))

    @group.default
    def _group_of_needs(self) -> str:
        return _GROUP_OF_NEEDS[self.needs]

    @property
    def name(self) -> str:
        """The family's base name (what the plugin host checks for clashes)."""
        return self.base


def _log_close(market: MarketData) -> np.ndarray:
    return np.log(market.close)


def _log_returns(market: MarketData) -> np.ndarray:
    returns = np.full(len(market), np.nan)
    returns[1:] = np.diff(_log_close(market))
    return returns


def _rolling(values: np.ndarray, k: int, reduce: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``reduce`` over each trailing window of k values, placed at the window's last bar (NaN before)."""
    out = np.full(values.shape[0], np.nan)
    if values.shape[0] >= k:
        out[k - 1:] = reduce(sliding_window_view(values, k))
    return out


def _safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (flat markets carry no signal)."""
    out = np.zeros(np.broadcast(numerator, denominator).shape)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return np.where(np.isnan(numerator) | np.isnan(denominator), np.nan, out)


@numba.njit(cache=True)
def _ema(values: np.ndarray, span: int) -> np.ndarray:
    alpha = 2.0 / (span + 1.0)
    out = np.empty(values.shape[0])
    out[0] = values[0]
    for t in range(1, values.shape[0]):
        out[t] = out[t - 1] + alpha * (values[t] - out[t - 1])
    return out


@numba.njit(cache=True)
def _ew_deviation(values: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """Each value's deviation from the exponentially weighted mean of the values so far, and the exponentially
    weighted variance (Finch 2009's incremental form), both with the weight ``alpha = 2 / (span + 1)`` and
    started at the first value."""
    alpha = 2.0 / (span + 1.0)
    deviation = np.empty(values.shape[0])
    variance = np.empty(values.shape[0])
    mean, spread = values[0], 0.0
    for t in range(values.shape[0]):
        step = values[t] - mean
        mean += alpha * step
        spread = (1.0 - alpha) * (spread + alpha * step * step)
        deviation[t] = values[t] - mean
        variance[t] = spread
    return deviation, variance


@numba.njit(cache=True)
def _wilder_rsi(close: np.ndarray, k: int) -> np.ndarray:
    out = np.full(close.shape[0], np.nan)
    if close.shape[0] <= k:
        return out
    gain = 0.0
    loss = 0.0
    for t in range(1, k + 1):
        change = close[t] - close[t - 1]
        gain += max(change, 0.0)
        loss += max(-change, 0.0)
    gain /= k
    loss /= k
    for t in range(k, close.shape[0]):
        if t > k:
            change = close[t] - close[t - 1]
            gain = (gain * (k - 1) + max(change, 0.0)) / k
            loss = (loss * (k - 1) + max(-change, 0.0)) / k
        total = gain + loss
        out[t] = (gain - loss) / total if total > 0.0 else 0.0
    return out


@numba.njit(cache=True)
def _cusum(returns: np.ndarray, sigma: np.ndarray, start: int, drift: float, threshold: float) -> np.ndarray:
    out = np.full(returns.shape[0], np.nan)
    upper = 0.0
    lower = 0.0
    for t in range(start, returns.shape[0]):
        z = returns[t] / sigma[t - 1] if sigma[t - 1] > 0.0 else 0.0
        upper = max(0.0, upper + z - drift)
        lower = min(0.0, lower + z + drift)
        out[t] = (upper + lower) / threshold
        if upper >= threshold:
            upper = 0.0
        if lower <= -threshold:
            lower = 0.0
    return out


def _ret(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    log_close = _log_close(market)
    out = np.full(len(market), np.nan)
    out[k:] = log_close[k:] - log_close[:-k]
    return out, k


def _rvol(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    squared = _log_returns(market) ** 2
    return np.sqrt(_rolling(squared, k, lambda w: w.mean(axis=1))), k


def _mom(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    ret, _ = _ret(market, k)
    vol, _ = _rvol(market, k)
    return _safe_ratio(ret, vol * np.sqrt(k)), k


def _rsi(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    return _wilder_rsi(np.ascontiguousarray(market.close), k), k


def _macd_line(market: MarketData, fast: int, slow: int) -> np.ndarray:
    close = np.ascontiguousarray(market.close)
    return (_ema(close, fast) - _ema(close, slow)) / close


def _macd(market: MarketData, fast: int, slow: int) -> tuple[np.ndarray, int]:
    out = _macd_line(market, fast, slow)
    out[:slow] = np.nan  # the EMAs start at the first close; treat the first `slow` bars as their transient
    return out, slow


def _macdh(market: MarketData, fast: int, slow: int, signal: int) -> tuple[np.ndarray, int]:
    line = _macd_line(market, fast, slow)
    out = line - _ema(line, signal)
    out[: slow + signal] = np.nan
    return out, slow + signal


def _boll(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    close = market.close
    mean = _rolling(close, k, lambda w: w.mean(axis=1))
    std = _rolling(close, k, lambda w: w.std(axis=1))
    return _safe_ratio(close - mean, 2.0 * std), k - 1


def _ewz(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    # The exponential weights follow a level that moves better than the flat window of ``boll``: on the suite's
    # mean-reversion market a threshold rule on ewz_256 reaches about 0.7 of the oracle, on boll_256 about 0.4
    # (docs/learner.md, "An exponentially weighted level"). Its first k bars are the averages' transient: the
    # first close's weight is (1 - alpha)^t, e^-2 at bar k.
    deviation, variance = _ew_deviation(np.ascontiguousarray(_log_close(market)), k)
    return _safe_ratio(deviation, np.sqrt(variance)), k


def _ma_ratio(market: MarketData, fast: int, slow: int) -> tuple[np.ndarray, int]:
    close = market.close
    fast_mean = _rolling(close, fast, lambda w: w.mean(axis=1))
    slow_mean = _rolling(close, slow, lambda w: w.mean(axis=1))
    return np.log(fast_mean / slow_mean), max(fast, slow) - 1


def _slope(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    centred = np.arange(k) - (k - 1) / 2.0
    return _rolling(_log_close(market), k, lambda w: w @ centred / (centred @ centred)), k - 1


def _cusum_feature(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    returns = _log_returns(market)
    vol, _ = _rvol(market, k)
    return _cusum(returns, vol, k + 1, _CUSUM_DRIFT, _CUSUM_THRESHOLD), k + 1


def _volz(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    volume = np.log1p(market.volume)
    mean = _rolling(volume, k, lambda w: w.mean(axis=1))
    std = _rolling(volume, k, lambda w: w.std(axis=1))
    return _safe_ratio(volume - mean, std), k - 1


def _seconds_of_day(market: MarketData) -> np.ndarray:
    seconds = market.timestamps.astype("datetime64[s]").view(np.int64)
    return (seconds % _DAY_S).astype(np.float64)


def _weekday(market: MarketData) -> np.ndarray:
    days = market.timestamps.astype("datetime64[D]").view(np.int64)
    return ((days + 3) % 7).astype(np.float64)  # 1970-01-01 was a Thursday; Monday = 0


def _tod(market: MarketData, trig: Callable) -> tuple[np.ndarray, int]:
    return trig(2 * np.pi * _seconds_of_day(market) / _DAY_S), 0


def _dow(market: MarketData, trig: Callable) -> tuple[np.ndarray, int]:
    return trig(2 * np.pi * (_weekday(market) + _seconds_of_day(market) / _DAY_S) / 7.0), 0


def _spread(market: MarketData) -> tuple[np.ndarray, int]:
    bid, ask = market.book[:, BOOK.BID_PRICE], market.book[:, BOOK.ASK_PRICE]
    return (ask - bid) / ((ask + bid) / 2.0) * 1e4, 0


def _imbalance(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return _safe_ratio(first - second, first + second)


def _book_pressure(market: MarketData) -> tuple[np.ndarray, int]:
    return _imbalance(market.book[:, BOOK.BID_SIZE], market.book[:, BOOK.ASK_SIZE]), 0


def _depth_imbalance(market: MarketData) -> tuple[np.ndarray, int]:
    return _imbalance(market.book[:, BOOK.BID_DEPTH], market.book[:, BOOK.ASK_DEPTH]), 0


def _ofi(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    ofi = _rolling(market.book[:, BOOK.OFI], k, lambda w: w.sum(axis=1))
    top = (market.book[:, BOOK.BID_SIZE] + market.book[:, BOOK.ASK_SIZE]) / 2.0
    depth = _rolling(top, k, lambda w: w.sum(axis=1))
    return _safe_ratio(ofi, np.maximum(depth, 1.0)), k - 1


def _trade_imbalance(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    buy = _rolling(market.flow[:, FLOW.BUY_VOLUME], k, lambda w: w.sum(axis=1))
    sell = _rolling(market.flow[:, FLOW.SELL_VOLUME], k, lambda w: w.sum(axis=1))
    return _imbalance(buy, sell), k - 1


FEATURES: dict[str, FeatureDef] = {
    f.base: f
    for f in (
        FeatureDef("ret", 1, "ohlcv", _ret, "log return over k bars: ln(c_t / c_(t-k))"),
        FeatureDef("rvol", 1, "ohlcv", _rvol, "realised volatility: sqrt(mean of r^2 over the last k bars)", mirror="even"),
        FeatureDef("mom", 1, "ohlcv", _mom, "momentum: ret_k / (rvol_k * sqrt(k)), 0 when rvol is 0"),
        FeatureDef("rsi", 1, "ohlcv", _rsi, "Wilder RSI over k bars, rescaled to [-1, 1]: (RSI - 50) / 50"),
        FeatureDef("macd", 2, "ohlcv", _macd, "MACD line: (EMA_fast(c) - EMA_slow(c)) / c"),
        FeatureDef("macdh", 3, "ohlcv", _macdh, "MACD histogram: line - EMA_signal(line)"),
        FeatureDef("boll", 1, "ohlcv", _boll, "Bollinger position: (c - SMA_k) / (2 * std_k(c))"),
        FeatureDef("ewz", 1, "ohlcv", _ewz, "exponentially weighted z-score of ln(c): (ln c - EWMA_k) / EWSD_k, "
                   "alpha = 2 / (k + 1)"),
        FeatureDef("ma_ratio", 2, "ohlcv", _ma_ratio, "moving-average ratio: ln(SMA_fast / SMA_slow)"),
        FeatureDef("slope", 1, "ohlcv", _slope, "OLS slope of ln(c) against bar number over k bars"),
        FeatureDef("cusum", 1, "ohlcv", _cusum_feature, "symmetric CUSUM of r / rvol_k(t-1), (S+ + S-) / h"),
        FeatureDef("volz", 1, "ohlcv", _volz, "volume z-score of ln(1 + v) over k bars", mirror="even"),
        FeatureDef("tod_sin", 0, "ohlcv", lambda m: _tod(m, np.sin), "sin(2 pi * UTC time of day / 24 h)", mirror="even"),
        FeatureDef("tod_cos", 0, "ohlcv", lambda m: _tod(m, np.cos), "cos(2 pi * UTC time of day / 24 h)", mirror="even"),
        FeatureDef("dow_sin", 0, "ohlcv", lambda m: _dow(m, np.sin), "sin(2 pi * (weekday + day fraction) / 7)", mirror="even"),
        FeatureDef("dow_cos", 0, "ohlcv", lambda m: _dow(m, np.cos), "cos(2 pi * (weekday + day fraction) / 7)", mirror="even"),
        FeatureDef("spread_bps", 0, "book", _spread, "quoted spread at the bar close, in basis points of the mid", mirror="even"),
        FeatureDef("book_pressure", 0, "book", _book_pressure, "(bid size - ask size) / (bid size + ask size) at the best level"),
        FeatureDef("depth_imbalance", 0, "book", _depth_imbalance, "(bid depth - ask depth) / (sum) over ten levels"),
        FeatureDef("ofi", 1, "book", _ofi, "order-flow imbalance summed over k bars / summed mean best-level size",
                   group="order_flow"),
        FeatureDef("trade_imbalance", 1, "flow", _trade_imbalance, "(buy - sell) / (buy + sell) aggressor volume over k bars"),
    )
}


def _split(name: str, families: Mapping[str, FeatureDef]) -> tuple[FeatureDef, tuple[int, ...]] | None:
    """The family and parameters of ``name`` in ``families``, None for an unknown base; a wrong count raises."""
    if name in families and families[name].arity == 0:
        return families[name], ()
    parts = name.split("_")
    for cut in range(len(parts) - 1, 0, -1):
        base, params = "_".join(parts[:cut]), parts[cut:]
        if base in families and all(p.isdigit() for p in params):
            feature = families[base]
            values = tuple(int(p) for p in params)
            if len(values) != feature.arity or any(v < 1 for v in values):
                raise DataError(f"feature {name!r}: {base} takes {feature.arity} positive integer parameter(s)")
            return feature, values
    return None


def parse_feature(name: str, families: Mapping[str, FeatureDef] | None = None) -> tuple[FeatureDef, tuple[int, ...]]:
    """Split a feature name into its family and integer parameters, checking the count.

    ``families``: the run's table (core and plugin families); None for the core's :data:`FEATURES`.
    """
    families = FEATURES if families is None else families
    found = _split(name, families)
    if found is None:
        raise DataError(
            f"unknown feature {name!r}; families: {', '.join(sorted(families))} (see docs/data.md; a feature "
            "plugin's families exist only while that plugin is loaded)"
        )
    return found


def known_shape(name: str) -> None:
    """Refuse a name whose base is a core family with the wrong parameters; accept any other base.

    What a config can check before the plugins are loaded: a base the core does not know may be a feature
    plugin's, and is checked against the run's table when the features are computed.
    """
    _split(name, FEATURES)


def feature_values(
    market: MarketData, name: str, families: Mapping[str, FeatureDef] | None = None
) -> tuple[np.ndarray, int]:
    """One feature's float64 values (NaN before its warm-up) and its warm-up bar."""
    feature, params = parse_feature(name, families)
    if "book" in feature.needs and market.book is None:
        raise DataError(f"{market.source}: feature {name!r} needs MBP-10 book data; load an mbp-10 DBN file or drop it")
    if "flow" in feature.needs and market.flow is None:
        raise DataError(f"{market.source}: feature {name!r} needs trade prints; load a trades or mbp-10 DBN file or drop it")
    if feature.needs == "levels" and market.levels is None:
        raise DataError(f"{market.source}: feature {name!r} needs each level of an MBP-10 book; load an mbp-10 DBN file or drop it")
    values, warmup = feature.compute(market, *params)
    values = np.array(values, dtype=np.float64)
    values[:warmup] = np.nan
    return values, warmup


def mirror_parity(name: str, families: Mapping[str, FeatureDef] | None = None) -> float:
    """-1.0 for a feature that changes sign in the mirrored market, +1.0 for one that does not."""
    feature, _ = parse_feature(name, families)
    return -1.0 if feature.mirror == "odd" else 1.0
