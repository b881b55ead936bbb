"""Synthetic markets for the environment tests (prices and features made from a seed)."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.actions import branch_sizes
from foxhunt.data.instrument import InstrumentSpec


def synthetic_market(seed: int, bars: int = 200, n_features: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A random-walk OHLC series ``[bars, 4]`` around 4000 and random features ``[bars, F]``."""
    rng = np.random.default_rng(seed)
    close = 4000.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, bars)))
    open_ = np.r_[close[0], close[:-1]] * np.exp(rng.normal(0.0, 0.002, bars))
    high = np.maximum(open_, close) * (1.0 + np.abs(rng.normal(0.0, 0.003, bars)))
    low = np.minimum(open_, close) * (1.0 - np.abs(rng.normal(0.0, 0.003, bars)))
    features = rng.normal(size=(bars, n_features)).astype(np.float32)
    return np.stack([open_, high, low, close], axis=1), features


def random_actions(rng: np.random.Generator, n_envs: int) -> np.ndarray:
    """Uniform random actions ``[envs, Branch]``."""
    return rng.integers(0, branch_sizes(), size=(n_envs, len(branch_sizes())))


# A small E-mini-like contract with round numbers so hand-computed costs stay readable.
TEST_INSTRUMENT = InstrumentSpec(
    "TEST", tick_size=0.25, multiplier=50.0, commission=2.0, initial_margin=10_000.0, maintenance_margin=9_000.0,
    spread_ticks=1.0, bars_per_year=252.0,
)


@pytest.fixture(scope="session")
def market():
    return synthetic_market


@pytest.fixture(scope="session")
def instrument() -> InstrumentSpec:
    return TEST_INSTRUMENT
