"""Seeded synthetic markets with known models, for tests and the learning suite.

A synthetic source is written ``synthetic:<kind>?key=value&key=value`` (grammar in
docs/data.md). The loaded :class:`MarketData` carries the canonical spec (every key,
defaults filled in) as its ``source``, so a market's model, and its oracle
(:mod:`foxhunt.env.oracle`), can be recomputed from the market alone.

Modules: ``spec`` (grammar, kinds, defaults, instruments), ``markets`` (the
generators), ``planted`` (the planted signal and its closed form), ``signal`` (each
model's conditional mean of the next return).
"""

from __future__ import annotations

from foxhunt.data.synthetic.markets import Regime, Trend, generate, log_returns, regime_states, trend_states
from foxhunt.data.synthetic.planted import oracle_positions, oracle_sharpe, planted_beta, planted_sharpe
from foxhunt.data.synthetic.signal import conditional_mean, market_conditional_mean
from foxhunt.data.synthetic.spec import (
    KIND_KEYS,
    KINDS,
    PREFIX,
    SYNTHETIC_FX_INSTRUMENT,
    SYNTHETIC_INSTRUMENT,
    SyntheticSpec,
    instrument_for,
    parse_spec,
    spec_of,
)

__all__ = [
    "KINDS",
    "KIND_KEYS",
    "PREFIX",
    "Regime",
    "Trend",
    "SyntheticSpec",
    "parse_spec",
    "spec_of",
    "instrument_for",
    "generate",
    "log_returns",
    "planted_beta",
    "oracle_positions",
    "oracle_sharpe",
    "planted_sharpe",
    "regime_states",
    "trend_states",
    "conditional_mean",
    "market_conditional_mean",
    "SYNTHETIC_INSTRUMENT",
    "SYNTHETIC_FX_INSTRUMENT",
]
