"""Markets for feature and mirror tests: a loaded market with a random MBP-10 book and trade flow added."""

from __future__ import annotations

import numpy as np

from foxhunt.data import BOOK, FLOW, MarketData


def with_book(market: MarketData, seed: int) -> MarketData:
    rng = np.random.default_rng(seed)
    n = len(market)
    book = np.empty((n, BOOK.size()))
    book[:, BOOK.BID_PRICE] = market.close - 0.01
    book[:, BOOK.ASK_PRICE] = market.close + 0.01
    book[:, BOOK.BID_SIZE] = rng.integers(1, 50, n)
    book[:, BOOK.ASK_SIZE] = rng.integers(1, 50, n)
    book[:, BOOK.BID_DEPTH] = book[:, BOOK.BID_SIZE] + rng.integers(10, 500, n)
    book[:, BOOK.ASK_DEPTH] = book[:, BOOK.ASK_SIZE] + rng.integers(10, 500, n)
    book[:, BOOK.OFI] = rng.normal(0, 20, n)
    flow = np.empty((n, FLOW.size()))
    flow[:, FLOW.BUY_VOLUME] = rng.integers(0, 100, n)
    flow[:, FLOW.SELL_VOLUME] = rng.integers(0, 100, n)
    flow[:, FLOW.TRADES] = rng.integers(1, 20, n)
    return MarketData(market.source, market.timestamps, market.ohlcv, market.instrument, market.report, book, flow)
