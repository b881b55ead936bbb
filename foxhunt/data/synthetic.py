"""Seeded synthetic markets: a planted, known-optimal signal, and a regime-switching market.

A synthetic source is written ``synthetic:<kind>?key=value&key=value`` (grammar in
docs/data.md). The loaded :class:`MarketData` carries the canonical spec (every key,
defaults filled in) as its ``source``, so the oracle can be recomputed from any
market without side information.

Planted market (log returns r, EMA momentum f, both observable from past closes)::

    r_t = beta * f_(t-1) + vol * eps_t          eps ~ N(0, 1)
    f_t = memory * f_(t-1) + (1 - memory) * r_t  f_0 = 0

so f is the exponential moving average of past returns and the conditional mean of
the next return is ``beta * f``. ``snr`` is the standard deviation of that
conditional mean over the noise ``vol``; beta is solved from it. The optimal unit
policy holds ``sign(f_(t-1))`` over bar t; :func:`planted_sharpe` gives its Sharpe
after costs in closed form, :func:`oracle_sharpe` measures it on a market.
"""

from __future__ import annotations

import enum
import math
from urllib.parse import parse_qsl

import attrs
import numba
import numpy as np

from foxhunt.data.assemble import build_market
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.market import OHLCV, MarketData
from foxhunt.data.validate import bar_frequency, bars_per_year, plain_row_label
from foxhunt.errors import DataError

__all__ = [
    "KINDS",
    "Regime",
    "SyntheticSpec",
    "parse_spec",
    "generate",
    "planted_beta",
    "oracle_positions",
    "oracle_sharpe",
    "planted_sharpe",
    "regime_states",
    "SYNTHETIC_INSTRUMENT",
]

KINDS = ("planted", "regime")
PREFIX = "synthetic:"
_DAY_NS = 86_400 * 10**9
_LAST_NS = int(np.datetime64("2262-01-01", "ns").view(np.int64))

# A small futures-like contract: at the default price 100 one contract is 5,000 of
# notional; one tick of spread and 2.0 commission per side cost about 5 bp.
SYNTHETIC_INSTRUMENT = InstrumentSpec("SYNTH", 0.01, 50.0, 2.0, 500.0, 450.0, bar_frequency="1d", bars_per_year=252.0)


class Regime(enum.IntEnum):
    """Hidden state of the regime-switching market (labels, not buffer positions)."""

    BULL = 0
    BEAR = 1
    SIDEWAYS = 2


# Per regime: (drift, volatility) in units of the spec's `vol`.
_REGIME_PARAMETERS = {Regime.BULL: (0.08, 1.0), Regime.BEAR: (-0.12, 1.6), Regime.SIDEWAYS: (0.0, 0.6)}


def _positive_int(instance: object, attribute: attrs.Attribute, value: int) -> None:
    if value < 2:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be an integer >= 2")


def _unit_interval(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be in [0, 1)")


def _positive(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value > 0:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be > 0")


@attrs.frozen
class SyntheticSpec:
    """A parsed ``synthetic:`` source. Every field is a key of the grammar."""

    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    bars: int = attrs.field(default=5000, validator=_positive_int)
    seed: int = 0
    bar: str = "1d"  # bar length; daily bars fall on weekdays, shorter bars are back to back
    start: str = "2000-01-03"  # first bar (UTC)
    price: float = attrs.field(default=100.0, validator=_positive)  # first close
    vol: float = attrs.field(default=0.01, validator=_positive)  # per-bar noise standard deviation (log return)
    snr: float = attrs.field(default=0.4, validator=_positive)  # planted: std of the predictable mean / vol
    memory: float = attrs.field(default=0.5, validator=_unit_interval)  # planted: EMA coefficient of the signal
    stay: float = attrs.field(default=0.98, validator=_unit_interval)  # regime: probability of keeping the regime

    def canonical(self) -> str:
        keys = ["bars", "seed", "bar", "start", "price", "vol"]
        keys += ["snr", "memory"] if self.kind == "planted" else ["stay"]
        return PREFIX + self.kind + "?" + "&".join(f"{key}={getattr(self, key)}" for key in keys)


def parse_spec(text: str) -> SyntheticSpec:
    """Parse ``synthetic:<kind>?key=value&...``; unknown kinds or keys are errors that list the valid ones."""
    if not text.startswith(PREFIX):
        raise DataError(f"{text!r} is not a synthetic spec; it must start with {PREFIX!r}")
    kind, _, query = text[len(PREFIX):].partition("?")
    if kind not in KINDS:
        raise DataError(f"{text!r}: unknown synthetic kind {kind!r}; use one of {list(KINDS)}")
    kind_keys = {"planted": {"snr", "memory"}, "regime": {"stay"}}[kind]
    allowed = {"bars", "seed", "bar", "start", "price", "vol"} | kind_keys
    values: dict[str, object] = {}
    for key, raw in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)) if query else []:
        if key not in allowed:
            raise DataError(f"{text!r}: key {key!r} is not valid for synthetic:{kind}; valid keys: {sorted(allowed)}")
        convert = {"bars": int, "seed": int, "bar": str, "start": str}.get(key, float)
        try:
            values[key] = convert(raw)
        except ValueError:
            raise DataError(f"{text!r}: {key}={raw!r} is not a valid {convert.__name__}") from None
    return SyntheticSpec(kind=kind, **values)


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


def planted_beta(snr: float, memory: float) -> float:
    """The feedback beta giving ``std(beta * f) / vol == snr`` (bisection; the map is increasing)."""
    def ratio(beta: float) -> float:
        rho = memory + (1 - memory) * beta
        return beta * (1 - memory) / math.sqrt(1 - rho * rho)

    low, high = 0.0, 1.0 - 1e-12
    if ratio(high) <= snr:
        raise DataError(f"synthetic:planted snr={snr} is too large for memory={memory}; lower snr")
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if ratio(middle) < snr else (low, middle)
    return (low + high) / 2


@numba.njit(cache=True)
def _planted_returns(noise: np.ndarray, beta: float, memory: float) -> np.ndarray:
    returns = np.zeros(noise.shape[0])
    signal = 0.0
    for t in range(1, noise.shape[0]):
        returns[t] = beta * signal + noise[t]
        signal = memory * signal + (1.0 - memory) * returns[t]
    return returns


@numba.njit(cache=True)
def _ema_of_returns(returns: np.ndarray, memory: float) -> np.ndarray:
    signal = np.zeros(returns.shape[0])
    for t in range(1, returns.shape[0]):
        signal[t] = memory * signal[t - 1] + (1.0 - memory) * returns[t]
    return signal


def _regime_path(spec: SyntheticSpec, rng: np.random.Generator) -> np.ndarray:
    states = np.empty(spec.bars, dtype=np.int64)
    states[0] = rng.integers(len(Regime))
    switch = rng.random(spec.bars) >= spec.stay
    offset = rng.integers(1, len(Regime), size=spec.bars)
    for t in range(1, spec.bars):
        states[t] = (states[t - 1] + offset[t]) % len(Regime) if switch[t] else states[t - 1]
    return states


def _log_returns(spec: SyntheticSpec) -> tuple[np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(spec.seed)
    if spec.kind == "planted":
        noise = rng.standard_normal(spec.bars) * spec.vol
        return _planted_returns(noise, planted_beta(spec.snr, spec.memory), spec.memory), rng
    states = _regime_path(spec, rng)
    drift = np.array([_REGIME_PARAMETERS[Regime(s)][0] for s in range(len(Regime))]) * spec.vol
    scale = np.array([_REGIME_PARAMETERS[Regime(s)][1] for s in range(len(Regime))]) * spec.vol
    returns = drift[states] + scale[states] * rng.standard_normal(spec.bars)
    returns[0] = 0.0
    return returns, rng


def regime_states(market: MarketData) -> np.ndarray:
    """The hidden :class:`Regime` of every bar of a ``synthetic:regime`` market (regenerated from its seed)."""
    spec = _spec_of(market, "regime")
    return _regime_path(spec, np.random.default_rng(spec.seed))


def generate(spec: SyntheticSpec | str, instrument: InstrumentSpec | str | None = None) -> MarketData:
    """Generate the market a spec describes; same spec, same bytes.

    Bars are continuous (each open is the previous close) so that a decision at a
    bar's close fills at the price the oracle is credited with. Highs and lows add
    a half-normal excursion beyond the open/close range.
    """
    spec = parse_spec(spec) if isinstance(spec, str) else spec
    returns, rng = _log_returns(spec)
    close = spec.price * np.exp(np.cumsum(returns))
    open_ = np.r_[spec.price, close[:-1]]
    excursion = np.abs(rng.standard_normal((2, spec.bars))) * spec.vol * 0.5
    ohlcv = np.empty((spec.bars, OHLCV.size()))
    ohlcv[:, OHLCV.OPEN] = open_
    ohlcv[:, OHLCV.CLOSE] = close
    ohlcv[:, OHLCV.HIGH] = np.maximum(open_, close) * np.exp(excursion[0])
    ohlcv[:, OHLCV.LOW] = np.minimum(open_, close) * np.exp(-excursion[1])
    ohlcv[:, OHLCV.VOLUME] = np.round(1000.0 * (1.0 + np.abs(returns) / spec.vol) * rng.lognormal(0.0, 0.3, spec.bars))
    ns = _timestamps(spec)
    if instrument is None:
        instrument = attrs.evolve(SYNTHETIC_INSTRUMENT, bar_frequency=bar_frequency(ns), bars_per_year=bars_per_year(ns))
    return build_market(
        spec.canonical(), ns, ohlcv, names=OHLCV.names(), time_column="timestamp",
        label=plain_row_label("bar"), instrument=instrument, notes=(f"synthetic {spec.kind} market, seed {spec.seed}",),
    )


def _spec_of(market: MarketData, kind: str) -> SyntheticSpec:
    if not market.source.startswith(PREFIX + kind):
        raise DataError(f"{market.source}: this is not a synthetic:{kind} market, so it has no known {kind} truth")
    return parse_spec(market.source)


def oracle_positions(market: MarketData) -> np.ndarray:
    """The optimal unit policy on a planted market: ``positions[t]`` is held over bar t (close t-1 to close t).

    It is ``sign(f_(t-1))``, computed from closes up to t-1 only; ``positions[0] = 0``.
    """
    spec = _spec_of(market, "planted")
    returns = np.r_[0.0, np.diff(np.log(market.close))]
    signal = _ema_of_returns(returns, spec.memory)
    positions = np.zeros(len(market))
    positions[1:] = np.sign(signal[:-1])
    return positions


def oracle_sharpe(market: MarketData, cost: float | None = None) -> float:
    """Annualised Sharpe, after costs, of :func:`oracle_positions` on this market.

    P&L per bar is ``p_t * r_t - c * |p_t - p_(t-1)|`` with r the log return.
    ``cost`` is the one-way cost per unit of notional traded; when None it is the
    instrument's half spread plus commission, relative to the previous close.
    Annualised with ``instrument.bars_per_year``.
    """
    positions = oracle_positions(market)
    close = market.close
    returns = np.diff(np.log(close))
    spec = market.instrument
    if cost is None:
        per_unit = (spec.spread_ticks * spec.tick_size / 2.0) / close[:-1] + spec.commission / (close[:-1] * spec.multiplier)
    else:
        per_unit = np.full(returns.shape, cost)
    pnl = positions[1:] * returns - per_unit * np.abs(np.diff(positions))
    return float(pnl.mean() / pnl.std() * math.sqrt(spec.bars_per_year))


def planted_sharpe(snr: float, memory: float, vol: float, cost: float, bars_per_year: float) -> float:
    """Closed-form stationary Sharpe of the planted oracle after a one-way ``cost`` per unit traded.

    With s = std(f), rho = memory + (1 - memory) * beta and (f_(t-1), f_t) bivariate
    normal with correlation rho: E|f| = s*sqrt(2/pi); a flip has probability
    q = arccos(rho)/pi and costs 2c; E[flip * |f_(t-1)|] = s*(1-rho)/sqrt(2*pi).
    """
    beta = planted_beta(snr, memory)
    rho = memory + (1 - memory) * beta
    s = (1 - memory) * vol / math.sqrt(1 - rho * rho)
    q = math.acos(rho) / math.pi
    mean = beta * s * math.sqrt(2 / math.pi) - 2 * cost * q
    second = beta**2 * s**2 + vol**2 - 4 * cost * beta * s * (1 - rho) / math.sqrt(2 * math.pi) + 4 * cost**2 * q
    return mean / math.sqrt(second - mean**2) * math.sqrt(bars_per_year)
