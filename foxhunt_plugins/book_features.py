"""Order-book, trade-intensity and multi-timeframe feature families, and the ``book_full`` set that uses them.

A feature plugin: it adds families to the feature-name grammar of a run (``foxhunt_features``) and one named
set (``foxhunt_feature_sets``). Nothing changes unless a config names them: the default set stays
``horizons``; ``[features] feature_set = "book_full"`` (an MBP-10 DBN source) uses them all.

Notation, per bar t at its close: ``qb``, ``qa`` best bid and ask sizes, ``Db``, ``Da`` sizes over the ten
levels, ``b_m``, ``a_m``, ``qb_m``, ``qa_m`` the prices and sizes of level m (1 the best), ``B``, ``S`` aggressor
buy and sell volume, ``N`` trade prints, ``c`` the close. Every family is causal
(its value at bar t reads bars <= t only) and NaN before its warm-up; formulas, warm-ups and parities are the
table in docs/data.md ("Feature plugins"). Block families (``mtf_*``) cut the series into k-bar blocks from
its first bar and read completed blocks only.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from foxhunt import FoxhuntError, hookimpl
from foxhunt.data import BOOK, BOOK_LEVELS, FLOW, LEVEL, MarketData, order_flow_imbalance
from foxhunt.features import FEATURE_SETS, FeatureDef, FeatureSet

__all__ = [
    "FAMILIES",
    "level_ofi",
    "BOOK_FULL",
    "HAWKES_WARMUP_SPANS",
    "foxhunt_features",
    "foxhunt_feature_sets",
]

# An exponential kernel's start is a transient: after 4 decay spans it weighs e^-4 (under 2 %) of its value.
HAWKES_WARMUP_SPANS = 4


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (an empty book or no trades carries no signal)."""
    out = np.zeros(np.broadcast(numerator, denominator).shape)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _trailing_sum(values: np.ndarray, k: int) -> np.ndarray:
    """Sum of the last k values at each bar (NaN for the first k - 1 bars)."""
    out = np.full(values.shape[0], np.nan)
    if values.shape[0] >= k:
        total = np.cumsum(np.r_[0.0, values])
        out[k - 1:] = total[k:] - total[:-k]
    return out


def _lagged_difference(values: np.ndarray, k: int) -> np.ndarray:
    """values[t] - values[t - k] (NaN for the first k bars)."""
    out = np.full(values.shape[0], np.nan)
    out[k:] = values[k:] - values[:-k]
    return out


@numba.njit(cache=True)
def _decayed_sum(values: np.ndarray, span: int) -> np.ndarray:
    """lambda_t = exp(-1/span) * lambda_(t-1) + values[t], lambda_(-1) = 0: a Hawkes-style exponential kernel."""
    decay = np.exp(-1.0 / span)
    out = np.empty(values.shape[0])
    level = 0.0
    for t in range(values.shape[0]):
        level = decay * level + values[t]
        out[t] = level
    return out


def _deep_imbalance(market: MarketData) -> tuple[np.ndarray, int]:
    book = market.book
    deep_bid = book[:, BOOK.BID_DEPTH] - book[:, BOOK.BID_SIZE]
    deep_ask = book[:, BOOK.ASK_DEPTH] - book[:, BOOK.ASK_SIZE]
    return _ratio(deep_bid - deep_ask, deep_bid + deep_ask), 0


def _levels(market: MarketData, name: str, d: int) -> np.ndarray:
    """The first d levels of the book ``[bars, d, LEVEL]``; a depth beyond the book's ten is refused."""
    if d > BOOK_LEVELS:
        raise FoxhuntError(f"feature {name}_{d}...: an MBP-10 book has {BOOK_LEVELS} levels, so d must be 1 to {BOOK_LEVELS}")
    return market.levels[:, :d]


def _lvl_imb(market: MarketData, d: int) -> tuple[np.ndarray, int]:
    level = _levels(market, "lvl_imb", d)[:, d - 1]
    return _ratio(level[:, LEVEL.BID_SIZE] - level[:, LEVEL.ASK_SIZE], level[:, LEVEL.BID_SIZE] + level[:, LEVEL.ASK_SIZE]), 0


def _cdi(market: MarketData, d: int) -> tuple[np.ndarray, int]:
    levels = _levels(market, "cdi", d)
    bid, ask = levels[:, :, LEVEL.BID_SIZE].sum(axis=1), levels[:, :, LEVEL.ASK_SIZE].sum(axis=1)
    return _ratio(bid - ask, bid + ask), 0


def level_ofi(levels: np.ndarray) -> np.ndarray:
    """Per-bar, per-level order-flow imbalance between consecutive bar closes ``[bars, levels]`` (row 0 is 0):
    ``e_m,t = 1{b_m,t >= b_m,t-1} qb_m,t - 1{b_m,t <= b_m,t-1} qb_m,t-1 - 1{a_m,t <= a_m,t-1} qa_m,t
    + 1{a_m,t >= a_m,t-1} qa_m,t-1``; an empty level (price NaN) adds nothing on its side."""
    bid, ask = levels[:, :, LEVEL.BID_PRICE], levels[:, :, LEVEL.ASK_PRICE]
    bid_size, ask_size = levels[:, :, LEVEL.BID_SIZE], levels[:, :, LEVEL.ASK_SIZE]
    with np.errstate(invalid="ignore"):  # NaN prices compare false: no term
        return order_flow_imbalance(bid, bid_size, ask, ask_size)  # the core's per-event formula, per bar and level


def _mlofi(market: MarketData, d: int, h: int) -> tuple[np.ndarray, int]:
    levels = _levels(market, "mlofi", d)
    flow = _trailing_sum(level_ofi(levels).sum(axis=1), h)
    resting = _trailing_sum((levels[:, :, LEVEL.BID_SIZE] + levels[:, :, LEVEL.ASK_SIZE]).sum(axis=1) / 2.0, h)
    return _ratio(np.nan_to_num(flow), np.maximum(np.nan_to_num(resting), 1.0)), h


def _qdep(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    book = market.book
    bid, ask = np.log1p(book[:, BOOK.BID_SIZE]), np.log1p(book[:, BOOK.ASK_SIZE])
    return _lagged_difference(bid, k) - _lagged_difference(ask, k), k


def _aggr(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    book, flow = market.book, market.flow
    buy = _ratio(_trailing_sum(flow[:, FLOW.BUY_VOLUME], k), _trailing_sum(book[:, BOOK.ASK_SIZE], k))
    sell = _ratio(_trailing_sum(flow[:, FLOW.SELL_VOLUME], k), _trailing_sum(book[:, BOOK.BID_SIZE], k))
    return np.log1p(np.nan_to_num(buy)) - np.log1p(np.nan_to_num(sell)), k - 1


def _hawkes(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    intensity = _decayed_sum(np.ascontiguousarray(market.flow[:, FLOW.TRADES]), k)
    return np.log1p((1.0 - np.exp(-1.0 / k)) * intensity), HAWKES_WARMUP_SPANS * k


def _hawkes_imbalance(market: MarketData, k: int) -> tuple[np.ndarray, int]:
    buy = _decayed_sum(np.ascontiguousarray(market.flow[:, FLOW.BUY_VOLUME]), k)
    sell = _decayed_sum(np.ascontiguousarray(market.flow[:, FLOW.SELL_VOLUME]), k)
    return _ratio(buy - sell, buy + sell), HAWKES_WARMUP_SPANS * k


def _block_log_closes(market: MarketData, k: int) -> tuple[np.ndarray, np.ndarray]:
    """ln c at the last bar of each completed k-bar block, and, per bar, the index of its last completed block
    (-1 before the first block completes)."""
    ends = np.arange(k - 1, len(market), k)
    latest = (np.arange(len(market)) + 1) // k - 1
    return np.log(market.close[ends]), latest


def _mtf_ret(market: MarketData, k: int, n: int) -> tuple[np.ndarray, int]:
    closes, latest = _block_log_closes(market, k)
    out = np.full(len(market), np.nan)
    ready = latest >= n
    out[ready] = closes[latest[ready]] - closes[latest[ready] - n]
    return out, (n + 1) * k - 1


def _mtf_rvol(market: MarketData, k: int, n: int) -> tuple[np.ndarray, int]:
    closes, latest = _block_log_closes(market, k)
    squared = np.r_[np.nan, np.diff(closes) ** 2]  # block j's return needs block j - 1's end
    window = _trailing_sum(np.nan_to_num(squared), n)  # over blocks j - n + 1 .. j (all complete once j >= n)
    out = np.full(len(market), np.nan)
    ready = latest >= n
    out[ready] = np.sqrt(window[latest[ready]] / (n * k))
    return out, (n + 1) * k - 1


FAMILIES: tuple[FeatureDef, ...] = (
    FeatureDef("deep_imbalance", 0, "book", _deep_imbalance,
               "levels 2-10 imbalance: ((Db - qb) - (Da - qa)) / ((Db - qb) + (Da - qa)), 0 on an empty book"),
    FeatureDef("lvl_imb", 1, "levels", _lvl_imb, "size imbalance of level d: (qb_d - qa_d) / (qb_d + qa_d)"),
    FeatureDef("cdi", 1, "levels", _cdi,
               "cumulative depth imbalance of levels 1..d: (sum qb_m - sum qa_m) / (sum qb_m + sum qa_m)"),
    FeatureDef("mlofi", 2, "levels", _mlofi,
               "multi-level order-flow imbalance of levels 1..d over h bars: sum of e_m,s / max(1, sum of "
               "(qb_m,s + qa_m,s) / 2), e_m,s the level's OFI between bar closes", group="order_flow"),
    FeatureDef("qdep", 1, "book", _qdep,
               "queue depletion over k bars: ln((1 + qb_t) / (1 + qb_(t-k))) - ln((1 + qa_t) / (1 + qa_(t-k)))",
               group="order_flow"),
    FeatureDef("aggr", 1, "book+flow", _aggr,
               "aggression ratio over k bars: ln(1 + sum B / sum qa) - ln(1 + sum S / sum qb), a ratio 0 when "
               "its queue sum is 0"),
    FeatureDef("hawkes", 1, "flow", _hawkes,
               "Hawkes-style trade intensity: ln(1 + (1 - e^(-1/k)) lambda_t), lambda_t = e^(-1/k) lambda_(t-1) + N_t",
               mirror="even"),
    FeatureDef("hawkes_imb", 1, "flow", _hawkes_imbalance,
               "(lambda^B - lambda^S) / (lambda^B + lambda^S), each lambda the hawkes kernel of B or S volume"),
    FeatureDef("mtf_ret", 2, "ohlcv", _mtf_ret,
               "log return over the last n completed k-bar blocks: ln c_(e_J) - ln c_(e_(J-n))", group="multi_timeframe"),
    FeatureDef("mtf_rvol", 2, "ohlcv", _mtf_rvol,
               "per-bar volatility of the last n completed k-bar blocks: sqrt(sum of n squared block returns / (n k))",
               mirror="even", group="multi_timeframe"),
)

# lvl_imb_1 and cdi_10 are the core's book_pressure and depth_imbalance (already in `book`): not repeated.
BOOK_FULL = FeatureSet(
    "book_full",
    "1",
    (
        *FEATURE_SETS["book"].names,
        "deep_imbalance", "lvl_imb_2", "lvl_imb_3", "lvl_imb_5", "cdi_3", "cdi_5",
        "mlofi_1_4", "mlofi_5_4", "mlofi_10_16", "qdep_1", "qdep_8", "aggr_4", "aggr_16",
        "hawkes_8", "hawkes_imb_8", "mtf_ret_16_1", "mtf_ret_16_4", "mtf_rvol_16_4",
    ),
)  # fmt: skip


@hookimpl
def foxhunt_features(config: Any) -> list[FeatureDef]:
    return list(FAMILIES)


@hookimpl
def foxhunt_feature_sets(config: Any) -> list[FeatureSet]:
    return [BOOK_FULL]
