"""Auxiliary tasks' share of the core: the prediction head's columns and the market's next returns.

A loss component that carries an :class:`~foxhunt.plugin.records.AuxiliaryTask` asks for two things the core
provides and nothing else in the learner uses:

- **columns of the auxiliary head**: the network grows one small MLP on the trunk's output whose outputs are
  laid end to end in component order (:func:`auxiliary_layout`); :meth:`LossInputs.auxiliary` hands each
  component its own columns. Its gradient reaches the trunk, which is the point: the trunk learns features
  that predict the market, and every value head reads the trunk.
- **the market's next returns** (only when some task's ``horizon`` is above 0; a task of ``horizon = 0`` trains
  its columns on the learner's own targets, and with every task at 0 no table is built or gathered):
  :func:`future_return_table` gives every bar ``t`` the log-returns of bars
  ``t + 1 .. t + H`` (``log close[t+h+1] / close[t+h]`` for ``h = 0 .. H-1``), divided by the standard
  deviation of one-bar log-returns over the fold's training window, so a target is in units of a typical
  bar's move whatever the instrument. A return that would read a close at or after the training window's
  end is masked (``valid = 0``): the validation and test windows are never looked into. The replay stores
  each transition's bar index and gathers its row at sampling time (``Batch.future_returns``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from foxhunt.plugin.records import LossComponent

__all__ = ["AuxiliaryLayout", "auxiliary_layout", "future_return_table"]


@attrs.frozen
class AuxiliaryLayout:
    """The auxiliary head's columns per component (``columns[name] = (start, stop)``), its width and the
    number of future returns the replay gathers (the largest ``horizon`` asked for; 0: no component asks)."""

    columns: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)
    outputs: int = 0
    horizon: int = 0


def auxiliary_layout(components: Sequence[LossComponent]) -> AuxiliaryLayout:
    """The :class:`AuxiliaryLayout` of the enabled components' :class:`~foxhunt.plugin.records.AuxiliaryTask`\\ s.

    The horizon is the largest any task asks for, 0 when each asks for none (then the learner builds no
    future-return table, and the replay neither stores bar indices nor gathers returns)."""
    columns: dict[str, tuple[int, int]] = {}
    width = horizon = 0
    for component in components:
        task = component.auxiliary
        if task is None:
            continue
        columns[component.name] = (width, width + task.outputs)
        width += task.outputs
        horizon = max(horizon, task.horizon)
    return AuxiliaryLayout(columns, width, horizon)


def future_return_table(close: np.ndarray, start: int, stop: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """``(returns [bars, horizon] float32, valid [bars, horizon] float32)`` for a fold training on ``[start, stop)``.

    ``returns[t, h] = log(close[t+h+1] / close[t+h]) / σ`` with ``σ`` the standard deviation of the one-bar
    log-returns inside ``[start, stop)`` (1 when the window's price never moves); ``valid[t, h] = 1`` only for
    ``start <= t`` and ``t + h + 1 < stop``, and ``returns`` is 0 wherever ``valid`` is 0. ``close`` must be
    positive (the data loader refuses other prices).
    """
    close = np.asarray(close, dtype=np.float64)
    if close.ndim != 1:
        raise ValueError(f"close must be a 1-d series of prices, got shape {close.shape}")
    bars = close.shape[0]
    if not 0 <= start < stop <= bars:
        raise ValueError(f"a fold window [{start}, {stop}) must lie inside the {bars} bars of the close series")
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1 bar, got {horizon}")
    one_bar = np.zeros(bars, dtype=np.float64)  # one_bar[t]: the return from close[t] to close[t+1]
    one_bar[:-1] = np.diff(np.log(close))
    inside = one_bar[start:stop - 1]
    scale = float(inside.std()) if inside.size > 1 else 0.0
    scale = scale if scale > 0.0 and np.isfinite(scale) else 1.0
    t = np.arange(bars)[:, None]
    ahead = t + np.arange(horizon)[None, :]  # the bar whose next close each column reads
    valid = (t >= start) & (ahead + 1 < stop)
    returns = np.where(valid, one_bar[np.minimum(ahead, bars - 1)] / scale, 0.0)
    return returns.astype(np.float32), valid.astype(np.float32)
