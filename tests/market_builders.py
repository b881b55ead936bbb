"""Markets for feature and mirror tests: a loaded market with a random MBP-10 book (every level too) and trade
flow added."""

from __future__ import annotations

import numpy as np

from foxhunt.data import BOOK, BOOK_LEVELS, FLOW, LEVEL, MarketData


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
    # the levels agree with the book: level 0 is the best, deeper ones a tick apart whose sizes add up to the depth
    levels = np.empty((n, BOOK_LEVELS, LEVEL.size()))
    ticks = 0.01 * np.arange(BOOK_LEVELS)
    levels[:, :, LEVEL.BID_PRICE] = book[:, BOOK.BID_PRICE, None] - ticks
    levels[:, :, LEVEL.ASK_PRICE] = book[:, BOOK.ASK_PRICE, None] + ticks
    for side, best, depth in ((LEVEL.BID_SIZE, BOOK.BID_SIZE, BOOK.BID_DEPTH), (LEVEL.ASK_SIZE, BOOK.ASK_SIZE, BOOK.ASK_DEPTH)):
        levels[:, 0, side] = book[:, best]
        levels[:, 1:, side] = [rng.multinomial(int(rest), np.full(BOOK_LEVELS - 1, 1 / (BOOK_LEVELS - 1)))
                               for rest in book[:, depth] - book[:, best]]
    return MarketData(market.source, market.timestamps, market.ohlcv, market.instrument, market.report, book, flow, levels)
