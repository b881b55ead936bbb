"""What a synthetic market's own model predicts: the conditional mean of the next bar's log return.

``conditional_mean(spec, close)[t] = E[ln c_(t+1) - ln c_t | c_0 .. c_t]`` under the
model the spec describes. It reads closes up to t only (a test perturbs every
later close), so it is a signal the oracle may act on at bar t's close. Per kind:

- ``ar1``: ``phi * r_t``;
- ``meanrev``: ``-kappa * (ln c_t - ln price)`` (the level is the first close, a model constant);
- ``planted``: ``beta * f_t`` (f the EMA of returns);
- ``regime``, ``trend``: the hidden Markov model's forward filter. With the
  posterior ``pi_t(k) = P(state_t = k | r_1 .. r_t)`` (uniform before the first
  return, as the generator draws the first state), the next state's distribution
  is ``pi_t @ P`` (P: stay on the diagonal, the rest spread evenly) and the mean
  is ``sum_k (pi_t @ P)(k) * mean_k``;
- ``randomwalk``: 0.
"""

from __future__ import annotations

import numba
import numpy as np

from foxhunt.data.market import MarketData
from foxhunt.data.synthetic.markets import state_moments
from foxhunt.data.synthetic.planted import ema_of_returns, planted_beta
from foxhunt.data.synthetic.spec import SyntheticSpec, spec_of

__all__ = ["conditional_mean", "market_conditional_mean", "transition_matrix", "forward_filter"]


def transition_matrix(states: int, stay: float) -> np.ndarray:
    """``P[i, j]``: probability of moving from state i to j in one bar."""
    matrix = np.full((states, states), (1.0 - stay) / (states - 1))
    np.fill_diagonal(matrix, stay)
    return matrix


@numba.njit(cache=True)
def forward_filter(returns: np.ndarray, transition: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Filtered state probabilities ``[bars, states]`` given returns up to each bar (``returns[0]`` is no observation)."""
    bars, states = returns.shape[0], mean.shape[0]
    posterior = np.empty((bars, states))
    belief = np.full(states, 1.0 / states)
    posterior[0] = belief
    for t in range(1, bars):
        prior = belief @ transition
        total = 0.0
        for k in range(states):
            z = (returns[t] - mean[k]) / scale[k]
            belief[k] = prior[k] * np.exp(-0.5 * z * z) / scale[k]
            total += belief[k]
        if total > 0.0:
            belief /= total
        else:  # every state is astronomically unlikely: fall back on the prior rather than divide by zero
            belief[:] = prior
        posterior[t] = belief
    return posterior


def conditional_mean(spec: SyntheticSpec, close: np.ndarray) -> np.ndarray:
    """``E[r_(t+1) | closes <= t]`` for every bar t of a market of this spec whose closes are ``close``."""
    log_close = np.log(np.asarray(close, dtype=np.float64))
    returns = np.r_[0.0, np.diff(log_close)]
    if spec.kind == "ar1":
        return spec.phi * returns
    if spec.kind == "meanrev":
        return -spec.kappa * (log_close - np.log(spec.price))
    if spec.kind == "planted":
        return planted_beta(spec.snr, spec.memory) * ema_of_returns(returns, spec.memory)
    if spec.kind in ("regime", "trend"):
        mean, scale = state_moments(spec)
        transition = transition_matrix(len(mean), spec.stay)
        posterior = forward_filter(returns, transition, mean, scale)
        return (posterior @ transition) @ mean
    return np.zeros(len(log_close))  # randomwalk: nothing to predict


def market_conditional_mean(market: MarketData) -> np.ndarray:
    """:func:`conditional_mean` of a synthetic market, from its canonical source and closes."""
    return conditional_mean(spec_of(market), market.close)
