"""Synthetic markets: determinism, valid bars, intrabar extremes against simulated Brownian bridges, and the
planted oracle against its closed form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.data import OHLCV, Regime, load, oracle_positions, oracle_sharpe, planted_sharpe, regime_states
from foxhunt.data.synthetic import generate, parse_spec, planted_beta
from foxhunt.data.synthetic.markets import bridge_extremes
from foxhunt.data.synthetic.spec import SYNTHETIC_FX_INSTRUMENT
from foxhunt.errors import DataError


@given(kind=st.sampled_from(["planted", "regime"]), seed=st.integers(0, 2**32 - 1), bars=st.integers(2, 400))
def test_bars_are_valid_and_deterministic(kind, seed, bars):
    spec = f"synthetic:{kind}?bars={bars}&seed={seed}"
    first, second = load(spec), load(spec)
    assert first.content_hash() == second.content_hash()
    assert len(first) == bars
    o, h, l, c = (first.ohlcv[:, f] for f in (OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW, OHLCV.CLOSE))
    assert (l > 0).all() and (h >= np.maximum(o, c)).all() and (l <= np.minimum(o, c)).all()
    np.testing.assert_array_equal(o[1:], c[:-1])  # continuous: a fill at the next open is the previous close


def test_different_seeds_differ_and_source_is_canonical():
    a = load("synthetic:planted?seed=1&bars=300")
    b = load("synthetic:planted?bars=300&seed=2")
    assert a.content_hash() != b.content_hash()
    assert a.source == "synthetic:planted?bars=300&seed=1&bar=1d&start=2000-01-03&price=100.0&vol=0.01&snr=0.4&memory=0.5"
    assert load(a.source).content_hash() == a.content_hash()


def test_oracle_sharpe_matches_closed_form():
    # 4 x 100k hourly bars; the sampling error of an annualised Sharpe here is ~0.3 (1%).
    cost = 0.0005
    measured = []
    for seed in range(4):
        market = load(f"synthetic:planted?bars=100000&seed={seed}&bar=1h&memory=0.8")
        measured.append(oracle_sharpe(market, cost=cost))
    spec = parse_spec(market.source)
    bars_per_year = market.instrument.bars_per_year
    expected = planted_sharpe(spec.snr, spec.memory, spec.vol, cost, bars_per_year)
    assert np.mean(measured) == pytest.approx(expected, rel=0.03)
    assert planted_sharpe(spec.snr, spec.memory, spec.vol, 0.0, bars_per_year) > expected  # costs lower it


def test_default_planted_market_is_strong_and_learnable():
    market = load("synthetic:planted?bars=5000&seed=1")
    sharpe = oracle_sharpe(market)  # instrument costs: half spread + commission
    assert sharpe > 3.0  # clearly above 1.5 after costs
    per_unit = (0.01 / 2 + 2.0 / 50.0) / 100.0  # half a tick + commission per contract, at the start price
    closed = planted_sharpe(0.4, 0.5, 0.01, per_unit, market.instrument.bars_per_year)
    assert sharpe == pytest.approx(closed, rel=0.25)  # 5,000 bars: about ±0.25 sampling error plus price drift
    # The signal is visible to a causal statistic: past-return EMA sign predicts the next return.
    positions = oracle_positions(market)
    returns = np.diff(np.log(market.close))
    assert np.mean(positions[1:] * returns) > 0
    assert positions[0] == 0 and set(np.unique(positions[1:])) <= {-1.0, 0.0, 1.0}


def test_oracle_positions_use_only_past_bars():
    market = load("synthetic:planted?bars=600&seed=5")
    cut = 300
    positions = oracle_positions(market)
    truncated = oracle_positions(market.slice(0, cut))
    np.testing.assert_array_equal(positions[:cut], truncated)


def test_planted_beta_hits_the_requested_snr():
    for snr, memory in [(0.1, 0.5), (0.4, 0.9), (1.0, 0.95)]:
        beta = planted_beta(snr, memory)
        rho = memory + (1 - memory) * beta
        assert beta * (1 - memory) / np.sqrt(1 - rho**2) == pytest.approx(snr, rel=1e-9)


def test_regime_market_has_distinct_regimes():
    market = load("synthetic:regime?bars=20000&seed=3")
    states = regime_states(market)
    returns = np.r_[0.0, np.diff(np.log(market.close))]
    vols = {r: returns[1:][states[1:] == r].std() for r in Regime}
    means = {r: returns[1:][states[1:] == r].mean() for r in Regime}
    assert vols[Regime.BEAR] > vols[Regime.BULL] > vols[Regime.SIDEWAYS]
    assert means[Regime.BULL] > 0 > means[Regime.BEAR]
    assert 0.5 < np.mean(states[1:] == states[:-1]) / 0.98 < 1.05


@pytest.mark.parametrize(("text", "message"), [
    ("synthetic:wavy", "unknown synthetic kind"),
    ("synthetic:planted?bars=10&colour=red", "key 'colour' is not valid"),
    ("synthetic:planted?bars=ten", "not a valid int"),
    ("synthetic:planted?memory=1.5", "memory=1.5 must be in"),
    ("synthetic:regime?snr=0.4", "key 'snr' is not valid"),
    ("synthetic:planted?bars=300000&bar=1d", "run past 2262"),
])  # fmt: skip
def test_spec_errors(text, message):
    with pytest.raises(DataError, match=message):
        generate(parse_spec(text))


def test_oracle_needs_a_planted_market():
    with pytest.raises(DataError, match="not a synthetic:planted market"):
        oracle_positions(load("synthetic:regime?bars=100"))


def _simulated_bridge_extremes(end: float, scale: float, paths: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 reference: the max and min of discretised Brownian bridges from 0 to ``end`` with variance
    ``scale**2`` over the bar (a Brownian motion with the endpoint's deviation removed linearly)."""
    rng = np.random.default_rng(seed)
    walk = np.cumsum(rng.standard_normal((paths, steps)) * scale / np.sqrt(steps), axis=1)
    time = np.arange(1, steps + 1) / steps
    bridge = walk - time * (walk[:, -1:] - end)
    return np.maximum(bridge.max(axis=1), max(0.0, end)), np.minimum(bridge.min(axis=1), min(0.0, end))


@pytest.mark.parametrize("end", [-1.5, 0.0, 0.7])
def test_bar_extremes_follow_the_brownian_bridge(end):
    # The closed-form draw against simulated bridges: the discretised path misses a little of the true extreme
    # (about 0.58 scale / sqrt(steps) = 0.02 here), so the tolerance is 0.05 scale.
    scale, draws = 1.0, 100_000
    uniforms = 1.0 - np.random.default_rng(7).random((2, draws))
    highest, lowest = bridge_extremes(np.full(draws, end), np.full(draws, scale), uniforms)
    simulated_high, simulated_low = _simulated_bridge_extremes(end, scale, 4000, 1000, seed=11)
    assert (highest >= max(0.0, end)).all() and (lowest <= min(0.0, end)).all()
    for q in (0.1, 0.5, 0.9):
        assert abs(np.quantile(highest, q) - np.quantile(simulated_high, q)) < 0.05
        assert abs(np.quantile(lowest, q) - np.quantile(simulated_low, q)) < 0.05


def test_a_resting_limit_order_earns_nothing_on_a_random_walk():
    # A buy resting under the decision bar's close fills when the next bar trades through it
    # (docs/fill-model.md). On a random walk what the close does after that fill must be a fair game. Highs and
    # lows drawn apart from the close (the previous generator) handed fills their offset: at a quarter of the
    # bar's scale, +6.9 ticks a fill, 22 standard errors; on the bridge it is within noise.
    tick = SYNTHETIC_FX_INSTRUMENT.tick_size
    market = load("synthetic:randomwalk?bars=200000&seed=3")
    offset = 0.25 * 0.001 * 1.1  # a quarter of the default vol, at the default price: about 27 ticks
    o, h, l, c = (market.ohlcv[1:, f] for f in (OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW, OHLCV.CLOSE))
    for side, limit, filled in ((1.0, o - offset, l < o - offset), (-1.0, o + offset, h > o + offset)):
        gain = side * (c[filled] - limit[filled]) / tick  # per contract, in ticks
        assert 0.75 < filled.mean() < 0.9  # a bridge crosses a quarter of its scale about 5 times in 6
        assert abs(gain.mean()) < 4 * gain.std() / np.sqrt(filled.sum())  # 4 standard errors: about 1.3 ticks
