"""What every fuzz test shares: valid bars to start from, byte-level damage, and the one property.

The property: loading a file either gives a :class:`MarketData` that keeps every promise of
docs/data.md (ordered times, finite positive prices inside float32, bars that are bars) or raises
foxhunt's own error, naming the file, within a time limit. Anything else (another exception, a
Rust panic, a hang) fails the example.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import numpy as np
from hypothesis import currently_in_test_context, event, settings
from hypothesis import strategies as st

from foxhunt.data import BOOK, FLOW, OHLCV, MarketData
from foxhunt.data.validate import FLOAT32_MAX, FLOAT32_TINY
from foxhunt.errors import FoxhuntError

__all__ = [
    "Bars",
    "bars",
    "byte_damage",
    "damage",
    "encodings",
    "expect_market_or_error",
    "SECONDS_PER_LOAD",
    "time_limit",
    "more_examples",
]

# A load of these small files takes milliseconds; anything near this is a hang, not a slow machine.
SECONDS_PER_LOAD = 20.0
SPACINGS = (1, 60, 3600, 86_400)
# 1990-01-01 to 2030-01-01 in seconds: the range generated bars start in.
FIRST_START, LAST_START = 631_152_000, 1_893_456_000


@attrs.frozen
class Bars:
    """Valid bars: times in seconds since 1970 (strictly increasing) and ``[bars, OHLCV]`` prices."""

    seconds: np.ndarray
    ohlcv: np.ndarray

    def __len__(self) -> int:
        return int(self.seconds.size)


@st.composite
def bars(draw: st.DrawFn, min_bars: int = 1, max_bars: int = 30) -> Bars:
    """A short valid bar series: a random walk at some price level, some spacing and start."""
    count = draw(st.integers(min_bars, max_bars))
    spacing = draw(st.sampled_from(SPACINGS))
    start = draw(st.integers(FIRST_START, LAST_START)) // spacing * spacing
    level = draw(st.sampled_from([0.00001234, 0.5, 1.1, 100.0, 4700.25, 65_000.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    close = level * np.exp(np.cumsum(rng.normal(0.0, 0.01, count)))
    open_ = np.r_[level, close[:-1]]
    ohlcv = np.empty((count, OHLCV.size()))
    ohlcv[:, OHLCV.OPEN] = open_
    ohlcv[:, OHLCV.CLOSE] = close
    ohlcv[:, OHLCV.HIGH] = np.maximum(open_, close) * (1 + np.abs(rng.normal(0.0, 0.002, count)))
    ohlcv[:, OHLCV.LOW] = np.minimum(open_, close) * (1 - np.abs(rng.normal(0.0, 0.002, count)))
    ohlcv[:, OHLCV.VOLUME] = rng.integers(0, 10_000, count)
    return Bars(seconds=start + spacing * np.arange(count, dtype=np.int64), ohlcv=ohlcv)


def more_examples(factor: int = 4) -> settings:
    """The loaded profile's example count times ``factor`` (ci: 100, nightly: 8,000).

    A fuzz example costs milliseconds, where most of the suite's property tests train or compile, so the
    fuzz tests can afford more of them than the profile gives everything else.
    """
    return settings(max_examples=factor * settings().max_examples)


# Byte-level damage, applied in order: (kind, position as a fraction of the length, payload).
_DAMAGE = st.one_of(
    st.tuples(st.just("overwrite"), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 32)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.none()),
    st.tuples(st.just("nul"), st.floats(0, 1), st.none()),
    st.tuples(st.just("duplicate"), st.floats(0, 1), st.integers(1, 64)),
)


def damage(data: bytes, operations: list[tuple[str, float, object]]) -> bytes:
    """``data`` with each operation applied at its relative position (so shrinking keeps it meaningful)."""
    out = bytearray(data)
    for kind, where, payload in operations:
        at = min(int(where * len(out)), max(len(out) - 1, 0))
        if kind == "overwrite":
            out[at : at + len(payload)] = payload
        elif kind == "insert":
            out[at:at] = payload
        elif kind == "delete":
            del out[at : at + payload]
        elif kind == "truncate":
            del out[at:]
        elif kind == "nul":
            out[at:at] = b"\x00"
        elif kind == "duplicate":
            out[at:at] = out[at : at + payload]
    return bytes(out)


def byte_damage(max_operations: int = 4) -> st.SearchStrategy[list[tuple[str, float, object]]]:
    return st.lists(_DAMAGE, min_size=1, max_size=max_operations)


# How a text file is written: UTF-8, with a byte-order mark, or in an encoding foxhunt does not read.
encodings = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-32", "latin-1", "cp1252"])


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def hang(signum: int, frame: object) -> None:
        raise TimeoutError(f"loading took more than {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def expect_market_or_error(load: Callable[[], MarketData], path: Path) -> MarketData | FoxhuntError:
    """Run ``load``: a valid MarketData, or foxhunt's own error naming ``path``; anything else propagates."""
    try:
        with time_limit(SECONDS_PER_LOAD):
            market = load()
    except FoxhuntError as error:
        message = str(error)
        assert message.strip(), "an empty error message"
        assert "Traceback" not in message
        assert str(path) in message, f"the error does not name the file: {message}"
        _count(f"refused: {type(error).__name__}")
        return error
    check_market(market)
    _count("loaded")
    return market


def _count(outcome: str) -> None:
    """How often examples load and are refused, shown by pytest --hypothesis-show-statistics."""
    if currently_in_test_context():
        event(outcome)


def check_market(market: MarketData) -> None:
    """Every promise of a loaded MarketData (docs/data.md, "Validation")."""
    ns = market.timestamps.view(np.int64)
    assert len(market) >= 1 and market.ohlcv.shape == (len(market), OHLCV.size())
    assert np.all(ns[1:] > ns[:-1]) and not np.any(ns == np.iinfo(np.int64).min)
    assert np.all(np.isfinite(market.ohlcv))
    prices = market.ohlcv[:, [OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW, OHLCV.CLOSE]]
    assert np.all(prices >= FLOAT32_TINY) and np.all(prices <= FLOAT32_MAX)
    assert np.all(market.high >= market.low)
    assert np.all((market.open >= market.low) & (market.open <= market.high))
    assert np.all((market.close >= market.low) & (market.close <= market.high))
    assert np.all(market.volume >= 0) and np.all(market.volume <= FLOAT32_MAX)
    assert not market.ohlcv.flags.writeable and not market.timestamps.flags.writeable
    if market.book is not None:
        assert market.book.shape == (len(market), BOOK.size())
    if market.flow is not None:
        assert market.flow.shape == (len(market), FLOW.size())
    if len(market) >= 2:
        assert market.instrument.bars_per_year > 0
    market.content_hash()
    market.report.summary()
