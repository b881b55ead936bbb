"""The planted market's signal and its closed-form oracle.

Log returns r and their exponential moving average f, both observable from past closes::

    r_t = beta * f_(t-1) + vol * eps_t          eps ~ N(0, 1)
    f_t = memory * f_(t-1) + (1 - memory) * r_t  f_0 = 0

so the conditional mean of the next return is ``beta * f``. ``snr`` is the standard
deviation of that conditional mean over the noise ``vol``; beta is solved from it.
The optimal unit policy ignoring fills holds ``sign(f_(t-1))`` over bar t;
:func:`planted_sharpe` gives its Sharpe after a flat cost in closed form and
:func:`oracle_sharpe` measures it on a market. The oracle under foxhunt's own
physics is :func:`foxhunt.env.oracle.oracle_backtest`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from foxhunt.data.market import MarketData
from foxhunt.data.synthetic.spec import spec_of
from foxhunt.errors import DataError

__all__ = ["planted_beta", "planted_returns", "ema_of_returns", "oracle_positions", "oracle_sharpe", "planted_sharpe"]


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
def planted_returns(noise: np.ndarray, beta: float, memory: float) -> np.ndarray:
    """Log returns fed back through their own EMA (``noise[0]`` is unused: the first bar has no return)."""
    returns = np.zeros(noise.shape[0])
    signal = 0.0
    for t in range(1, noise.shape[0]):
        returns[t] = beta * signal + noise[t]
        signal = memory * signal + (1.0 - memory) * returns[t]
    return returns


@numba.njit(cache=True)
def ema_of_returns(returns: np.ndarray, memory: float) -> np.ndarray:
    """``f_t = memory * f_(t-1) + (1 - memory) * r_t`` with ``f_0 = 0``."""
    signal = np.zeros(returns.shape[0])
    for t in range(1, returns.shape[0]):
        signal[t] = memory * signal[t - 1] + (1.0 - memory) * returns[t]
    return signal


def oracle_positions(market: MarketData) -> np.ndarray:
    """The optimal unit policy on a planted market: ``positions[t]`` is held over bar t (close t-1 to close t).

    It is ``sign(f_(t-1))``, computed from closes up to t-1 only; ``positions[0] = 0``.
    """
    spec = spec_of(market, "planted")
    returns = np.r_[0.0, np.diff(np.log(market.close))]
    signal = ema_of_returns(returns, spec.memory)
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
