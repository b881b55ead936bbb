"""The learning suite's synthetic kinds (ar1, meanrev, trend, randomwalk): grammar, determinism, and their models.

Each model's ``conditional_mean`` is checked the way a forecaster is: on a long
series, regressing the next return on it gives a slope of one.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.data import LEARNING_SUITE, OHLCV, Trend, list_datasets, load, trend_states
from foxhunt.data.synthetic import KIND_KEYS, KINDS, SyntheticSpec, conditional_mean, generate, parse_spec
from foxhunt.errors import DataError

SUITE_KINDS = ("ar1", "meanrev", "trend", "randomwalk")


@settings(max_examples=20)
@given(kind=st.sampled_from(SUITE_KINDS), seed=st.integers(0, 2**32 - 1), bars=st.integers(2, 300))
def test_same_spec_same_bytes_and_valid_continuous_bars(kind, seed, bars):
    spec = f"synthetic:{kind}?bars={bars}&seed={seed}"
    first, second = load(spec), load(spec)
    assert first.content_hash() == second.content_hash()
    assert len(first) == bars and first.instrument.symbol == "SYNTHFX" and first.instrument.bar_frequency == "1h"
    o, h, l, c = (first.ohlcv[:, f] for f in (OHLCV.OPEN, OHLCV.HIGH, OHLCV.LOW, OHLCV.CLOSE))
    assert (l > 0).all() and (h >= np.maximum(o, c)).all() and (l <= np.minimum(o, c)).all()
    np.testing.assert_array_equal(o[1:], c[:-1])


@pytest.mark.parametrize("kind", SUITE_KINDS)
def test_seeds_differ_and_the_canonical_source_round_trips(kind):
    a, b = load(f"synthetic:{kind}?bars=200&seed=1"), load(f"synthetic:{kind}?seed=2&bars=200")
    assert a.content_hash() != b.content_hash()
    spec = parse_spec(a.source)
    assert spec == attrs.evolve(SyntheticSpec(kind=kind), bars=200, seed=1)  # code defaults match parsed defaults
    assert a.source == spec.canonical()
    assert [key for key, _ in (pair.split("=") for pair in a.source.split("?")[1].split("&"))] == [
        "bars", "seed", "bar", "start", "price", "vol", *KIND_KEYS[kind]
    ]
    assert load(a.source).content_hash() == a.content_hash()


def test_suite_kinds_have_eurusd_like_defaults_and_old_kinds_keep_theirs():
    ar1 = parse_spec("synthetic:ar1")
    assert (ar1.bar, ar1.price, ar1.vol, ar1.phi) == ("1h", 1.1, 0.001, 0.1)
    assert parse_spec("synthetic:trend").stay == 0.995 and parse_spec("synthetic:regime").stay == 0.98
    planted = parse_spec("synthetic:planted")
    assert (planted.bar, planted.price, planted.vol) == ("1d", 100.0, 0.01)


@pytest.mark.parametrize(("text", "message"), [
    ("synthetic:ar1?snr=0.4", "key 'snr' is not valid for synthetic:ar1"),
    ("synthetic:randomwalk?phi=0.1", "key 'phi' is not valid for synthetic:randomwalk"),
    ("synthetic:meanrev?phi=0.1", "key 'phi' is not valid for synthetic:meanrev"),
    ("synthetic:trend?kappa=0.1", "key 'kappa' is not valid for synthetic:trend"),
    ("synthetic:ar1?phi=1.0", "phi=1.0 must be in \\(-1, 1\\)"),
    ("synthetic:ar1?phi=strong", "phi='strong' is not a valid float"),
    ("synthetic:meanrev?kappa=0", "kappa=0.0 must be in \\(0, 1\\)"),
    ("synthetic:trend?drift=-0.1", "drift=-0.1 must be > 0"),
    ("synthetic:trend?stay=1", "stay=1.0 must be in \\[0, 1\\)"),
])  # fmt: skip
def test_bad_keys_and_values_are_data_errors_naming_the_key(text, message):
    with pytest.raises(DataError, match=message):
        generate(parse_spec(text))


@pytest.mark.parametrize("phi", [0.3, -0.2])
def test_ar1_lag_one_autocorrelation_is_phi(phi):
    returns = np.diff(np.log(load(f"synthetic:ar1?bars=100000&seed=7&phi={phi}").close))
    assert np.corrcoef(returns[1:], returns[:-1])[0, 1] == pytest.approx(phi, abs=0.015)  # standard error ~0.003


def test_meanrev_log_price_reverts_to_the_first_close_at_rate_kappa():
    market = load("synthetic:meanrev?bars=100000&seed=7&kappa=0.02")
    deviation = np.log(market.close) - np.log(1.1)
    slope = np.polyfit(deviation[:-1], deviation[1:], 1)[0]
    assert slope == pytest.approx(0.98, abs=0.005)


def test_trend_states_persist_and_carry_their_drift():
    market = load("synthetic:trend?bars=50000&seed=7&drift=0.2&stay=0.99")
    states = trend_states(market)
    returns = np.r_[0.0, np.diff(np.log(market.close))]
    assert np.mean(states[1:] == states[:-1]) == pytest.approx(0.99, abs=0.003)
    for state, sign in ((Trend.UP, 1.0), (Trend.DOWN, -1.0)):
        assert returns[1:][states[1:] == state].mean() == pytest.approx(sign * 0.2 * 0.001, abs=0.00004)


@pytest.mark.parametrize("source", [
    "synthetic:ar1?phi=0.2", "synthetic:ar1?phi=-0.2", "synthetic:meanrev?kappa=0.01",
    "synthetic:trend", "synthetic:regime?stay=0.99&bar=1h", "synthetic:planted?bar=1h",
])  # fmt: skip
def test_conditional_mean_forecasts_the_next_return_with_slope_one(source):
    market = load(f"{source}{'&' if '?' in source else '?'}bars=100000&seed=11")
    mean = conditional_mean(parse_spec(market.source), market.close)
    nxt = np.diff(np.log(market.close))
    slope = np.polyfit(mean[:-1], nxt, 1)[0]
    assert slope == pytest.approx(1.0, abs=0.15)


def test_random_walk_has_no_forecast():
    market = load("synthetic:randomwalk?bars=2000&seed=3")
    assert not conditional_mean(parse_spec(market.source), market.close).any()
    returns = np.diff(np.log(market.close))
    assert abs(returns.mean()) < 4 * 0.001 / np.sqrt(len(returns))


@given(cut=st.integers(1, 398), kind=st.sampled_from(["ar1", "meanrev", "trend", "regime", "planted"]))
@settings(max_examples=30)
def test_conditional_mean_reads_no_later_close(cut, kind):
    market = load(f"synthetic:{kind}?bars=400&seed=5")
    spec = parse_spec(market.source)
    perturbed = market.close.copy()
    perturbed[cut + 1:] *= np.exp(np.linspace(0.01, -0.03, len(perturbed) - cut - 1))
    np.testing.assert_array_equal(conditional_mean(spec, market.close)[: cut + 1], conditional_mean(spec, perturbed)[: cut + 1])


def test_datasets_list_shows_every_kind_and_the_suite():
    rows = {info.name: info for info in list_datasets()}
    for kind in KINDS:
        assert rows[f"synthetic:{kind}"].kind == "synthetic"
    for source in LEARNING_SUITE.values():
        assert rows[source].kind == "suite"
        assert load(source).source == parse_spec(source).canonical()
    assert rows["synthetic:ar1"].instrument == "SYNTHFX" and rows["synthetic:planted"].instrument == "SYNTH"
