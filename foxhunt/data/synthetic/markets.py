"""Generating a synthetic market from its spec: log returns per kind, bars, timestamps.

Every kind draws from ``numpy.random.default_rng(seed)`` in a fixed order (the
returns, then the bars' intrabar extremes and volumes), so the same spec gives
the same bytes. The models (docs/data.md has them with their oracles):

- ``planted``: returns fed back through their own EMA (``planted.py``);
- ``regime``: a hidden Markov chain over bull/bear/sideways drift and volatility;
- ``ar1``: ``r_t = phi * r_(t-1) + vol * eps_t``;
- ``meanrev``: the log price is an AR(1) (discrete Ornstein-Uhlenbeck) around the first close,
  ``x_t - x_0 = (1 - kappa) * (x_(t-1) - x_0) + vol * eps_t``;
- ``trend``: a hidden Markov chain over an up and a down drift of ``drift * vol`` per bar;
- ``randomwalk``: ``r_t = vol * eps_t``, no drift.
"""

from __future__ import annotations

import enum

import attrs
import numba
import numpy as np

from foxhunt.data.assemble import build_market
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.market import OHLCV, MarketData
from foxhunt.data.synthetic.planted import planted_beta, planted_returns
from foxhunt.data.synthetic.spec import SyntheticSpec, instrument_for, parse_spec, spec_of
from foxhunt.data.validate import bar_frequency, bars_per_year, plain_row_label
from foxhunt.errors import DataError

__all__ = ["Regime", "Trend", "REGIME_PARAMETERS", "TREND_PARAMETERS", "state_moments", "log_returns", "bridge_extremes", "generate", "regime_states", "trend_states"]

_DAY_NS = 86_400 * 10**9
_LAST_NS = int(np.datetime64("2262-01-01", "ns").view(np.int64))


class Regime(enum.IntEnum):
    """Hidden state of the regime-switching market (labels, not buffer positions)."""

    BULL = 0
    BEAR = 1
    SIDEWAYS = 2


class Trend(enum.IntEnum):
    """Hidden state of the trend market (labels, not buffer positions)."""

    UP = 0
    DOWN = 1


# Per state: (drift, volatility) in units of the spec's `vol` (the trend's drift is also scaled by `drift`).
REGIME_PARAMETERS = {Regime.BULL: (0.08, 1.0), Regime.BEAR: (-0.12, 1.6), Regime.SIDEWAYS: (0.0, 0.6)}
TREND_PARAMETERS = {Trend.UP: (1.0, 1.0), Trend.DOWN: (-1.0, 1.0)}


def _timestamps(spec: SyntheticSpec) -> np.ndarray:
    from foxhunt.data.dbn import parse_bar  # the bar-length grammar is shared with DBN aggregation

    step = parse_bar(spec.bar)
    try:
        start = np.datetime64(spec.start, "ns")
    except ValueError:
        raise DataError(f"synthetic spec: start={spec.start!r} is not an ISO date such as 2000-01-03") from None
    if step == _DAY_NS:
        days = np.busday_offset(start.astype("datetime64[D]"), np.arange(spec.bars), roll="forward")
        last = int(days[-1].astype(np.int64)) * _DAY_NS  # Python int: no silent int64 overflow
    else:
        last = int(start.view(np.int64)) + step * (spec.bars - 1)
    if last >= _LAST_NS:
        raise DataError(
            f"synthetic spec: {spec.bars} bars of {spec.bar} from {spec.start} run past 2262, "
            "the end of nanosecond timestamps; use fewer bars or shorter ones"
        )
    if step == _DAY_NS:
        return days.astype("datetime64[ns]").view(np.int64)
    return start.view(np.int64) + step * np.arange(spec.bars, dtype=np.int64)


@numba.njit(cache=True)
def _autoregression(noise: np.ndarray, coefficient: float) -> np.ndarray:
    """``x_t = coefficient * x_(t-1) + noise_t`` with ``x_0 = 0`` (``noise[0]`` unused)."""
    values = np.zeros(noise.shape[0])
    for t in range(1, noise.shape[0]):
        values[t] = coefficient * values[t - 1] + noise[t]
    return values


def _markov_path(states: int, stay: float, bars: int, rng: np.random.Generator) -> np.ndarray:
    """A chain that keeps its state with probability ``stay`` and otherwise moves to one of the others."""
    path = np.empty(bars, dtype=np.int64)
    path[0] = rng.integers(states)
    switch = rng.random(bars) >= stay
    offset = rng.integers(1, states, size=bars)
    for t in range(1, bars):
        path[t] = (path[t - 1] + offset[t]) % states if switch[t] else path[t - 1]
    return path


def _hidden_path(spec: SyntheticSpec, rng: np.random.Generator) -> np.ndarray:
    states = len(Regime) if spec.kind == "regime" else len(Trend)
    return _markov_path(states, spec.stay, spec.bars, rng)


def state_moments(spec: SyntheticSpec) -> tuple[np.ndarray, np.ndarray]:
    """Per hidden state of a regime or trend market: the mean and standard deviation of its log returns."""
    if spec.kind == "regime":
        table = [REGIME_PARAMETERS[state] for state in Regime]
        return np.array([d for d, _ in table]) * spec.vol, np.array([s for _, s in table]) * spec.vol
    table = [TREND_PARAMETERS[state] for state in Trend]
    return np.array([d for d, _ in table]) * spec.drift * spec.vol, np.array([s for _, s in table]) * spec.vol


def log_returns(spec: SyntheticSpec) -> tuple[np.ndarray, np.random.Generator]:
    """The market's log returns (``r[0] = 0``) and the generator, positioned for the bars' other draws."""
    returns, _, rng = _returns_and_scales(spec)
    return returns, rng


def _returns_and_scales(spec: SyntheticSpec) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    """The log returns, each bar's innovation scale (the intrabar diffusion's standard deviation over the bar)
    and the generator, positioned after the returns' draws."""
    rng = np.random.default_rng(spec.seed)
    if spec.kind in ("regime", "trend"):
        path = _hidden_path(spec, rng)
        mean, scale = state_moments(spec)
        returns = mean[path] + scale[path] * rng.standard_normal(spec.bars)
        returns[0] = 0.0
        return returns, scale[path], rng
    scales = np.full(spec.bars, spec.vol)
    noise = rng.standard_normal(spec.bars) * spec.vol
    if spec.kind == "planted":
        return planted_returns(noise, planted_beta(spec.snr, spec.memory), spec.memory), scales, rng
    if spec.kind == "ar1":
        return _autoregression(noise, spec.phi), scales, rng
    if spec.kind == "meanrev":
        deviation = _autoregression(noise, 1.0 - spec.kappa)  # log price minus the level, 0 at the first bar
        return np.r_[0.0, np.diff(deviation)], scales, rng
    noise[0] = 0.0  # randomwalk
    return noise, scales, rng


def bridge_extremes(returns: np.ndarray, scales: np.ndarray, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each bar's highest and lowest log price relative to its open, drawn from a Brownian bridge.

    Inside a bar the log price is taken to be a Brownian motion of variance ``scale**2`` over the bar, pinned
    at 0 (the open) and at ``return`` (the close). Given both ends its maximum ``M`` has
    ``P(M >= m) = exp(-2 m (m - b) / s**2)`` for ``m >= max(0, b)`` (and the minimum the mirror image), so
    ``M = (b + sqrt(b**2 - 2 s**2 ln U)) / 2`` for a uniform ``U`` in (0, 1]. A resting limit order is then
    filled exactly when the path crosses its price, and what the close does after that crossing is a fair
    game: the fill carries the adverse selection a continuous market has. An excursion drawn independently
    of the close would fill nearly every limit order at its improved price, making a PASSIVE limit order
    free under ``SYNTHFX`` and a random walk profitable to churn.
    ``uniforms`` is ``[2, bars]`` in (0, 1] (the maximum's, then the minimum's).
    """
    spread = np.sqrt(returns**2 - 2.0 * scales**2 * np.log(uniforms))
    return (returns + spread[0]) / 2.0, (returns - spread[1]) / 2.0


def regime_states(market: MarketData) -> np.ndarray:
    """The hidden :class:`Regime` of every bar of a ``synthetic:regime`` market (regenerated from its seed)."""
    spec = spec_of(market, "regime")
    return _hidden_path(spec, np.random.default_rng(spec.seed))


def trend_states(market: MarketData) -> np.ndarray:
    """The hidden :class:`Trend` of every bar of a ``synthetic:trend`` market (regenerated from its seed)."""
    spec = spec_of(market, "trend")
    return _hidden_path(spec, np.random.default_rng(spec.seed))


def generate(spec: SyntheticSpec | str, instrument: InstrumentSpec | str | None = None) -> MarketData:
    """Generate the market a spec describes; same spec, same bytes.

    Bars are continuous (each open is the previous close) so that a decision at a
    bar's close fills at the price the oracle is credited with. Highs and lows are
    the extremes of a Brownian bridge from the open to the close
    (:func:`bridge_extremes`), so a limit order's fill is as informative as in a
    continuous market.
    """
    spec = parse_spec(spec) if isinstance(spec, str) else spec
    returns, scales, rng = _returns_and_scales(spec)
    close = spec.price * np.exp(np.cumsum(returns))
    open_ = np.r_[spec.price, close[:-1]]
    highest, lowest = bridge_extremes(returns, scales, 1.0 - rng.random((2, spec.bars)))  # (0, 1]: finite logs
    ohlcv = np.empty((spec.bars, OHLCV.size()))
    ohlcv[:, OHLCV.OPEN] = open_
    ohlcv[:, OHLCV.CLOSE] = close
    # the bridge's extremes hold the open and the close in [low, high]; max/min keep it so in floating point
    ohlcv[:, OHLCV.HIGH] = np.maximum(np.maximum(open_, close), open_ * np.exp(highest))
    ohlcv[:, OHLCV.LOW] = np.minimum(np.minimum(open_, close), open_ * np.exp(lowest))
    ohlcv[:, OHLCV.VOLUME] = np.round(1000.0 * (1.0 + np.abs(returns) / spec.vol) * rng.lognormal(0.0, 0.3, spec.bars))
    ns = _timestamps(spec)
    if instrument is None:
        instrument = attrs.evolve(instrument_for(spec), bar_frequency=bar_frequency(ns), bars_per_year=bars_per_year(ns))
    return build_market(
        spec.canonical(), ns, ohlcv, names=OHLCV.names(), time_column="timestamp",
        label=plain_row_label("bar"), instrument=instrument, notes=(f"synthetic {spec.kind} market, seed {spec.seed}",),
        layout=f"synthetic {spec.kind} market", time_note="generated in UTC",
    )
