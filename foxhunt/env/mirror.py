"""The counterfactual mirror of an observation: the same bar seen in the market whose every move is negated.

In the mirrored market every log return changes sign and bids swap with asks,
so each "odd" feature (returns, momentum, imbalances; declared per feature
family in ``foxhunt/features/library.py``) changes sign and each "even" one
(volatility, volume, calendar, spread) is unchanged; the position changes sign
(``PORTFOLIO_MIRROR_PARITY``). A LONG there is a SHORT here, and the reward is
the same: P&L and costs of a trade and of its mirror are equal. The ``mirror``
replay-augmentation plugin (``foxhunt_plugins/augmentations/mirror.py``,
``[plugins.mirror]``) turns a share of every sampled batch into its mirror, so
each transition also teaches the opposite side and a drift of the training
window cannot be learnt as a signal. The map lives here, in the core, because it
is the features' declared parity and the portfolio table's.

Features are normalised per fold, ``z = (x - mean) / std``, so the mirror of an
odd feature is ``z' = (-x - mean) / std = -z - 2 mean / std``: an affine map per
observation column, then the normaliser's clip.
"""

from __future__ import annotations

import attrs
import numpy as np

from foxhunt.env.tables import PORTFOLIO_MIRROR_PARITY, PortfolioObs
from foxhunt.features import Normalizer
from foxhunt.features.library import mirror_parity

__all__ = ["ObservationMirror", "observation_mirror"]


@attrs.frozen(eq=False)
class ObservationMirror:
    """``obs' = clip(obs * scale + shift, low, high)`` per column ``[D]`` (float64; ±inf where nothing is clipped)."""

    scale: np.ndarray
    shift: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def apply(self, obs: np.ndarray) -> np.ndarray:
        """The mirrored observations of ``obs [..., D]`` (a float64 reference for tests and tools)."""
        return np.clip(np.asarray(obs, dtype=np.float64) * self.scale + self.shift, self.low, self.high)


def observation_mirror(feature_names: tuple[str, ...], normalizer: Normalizer,
                       parity: tuple[float, ...] = ()) -> ObservationMirror:
    """The mirror of observations ``[features normalised by normalizer, PortfolioObs]``.

    ``parity``: each feature's (the run's feature table's, :attr:`foxhunt.features.FeatureMatrix.parity`);
    empty: each name's parity among the core's families."""
    if parity and len(parity) != len(feature_names):
        raise ValueError(f"{len(parity)} feature parities for {len(feature_names)} feature names")
    parity = np.array(parity or [mirror_parity(name) for name in feature_names], dtype=np.float64)
    odd = parity < 0
    feature_shift = np.where(odd, -2.0 * normalizer.mean / normalizer.std, 0.0)
    portfolio = np.array([PORTFOLIO_MIRROR_PARITY[column] for column in PortfolioObs], dtype=np.float64)
    clip = np.inf if normalizer.clip is None else normalizer.clip
    n_portfolio = len(PortfolioObs)
    return ObservationMirror(
        scale=np.concatenate([parity, portfolio]),
        shift=np.concatenate([feature_shift, np.zeros(n_portfolio)]),
        low=np.concatenate([np.full(len(feature_names), -clip), np.full(n_portfolio, -np.inf)]),
        high=np.concatenate([np.full(len(feature_names), clip), np.full(n_portfolio, np.inf)]),
    )
