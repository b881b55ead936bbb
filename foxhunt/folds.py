"""Purged, embargoed walk-forward folds.

Each fold trains on a window, skips an embargo gap, and validates on the window
right after it; the next fold's validation window follows the previous one. The
folds are placed so that the last validation window ends at the last bar (the
most recent data is validated on)::

    bars: | warm-up | ....... | train 0 | emb | val 0 | val 1 | val 2 |
    fold 0:                   [ train  ][ emb ][ val ]
    fold 1 (rolling):                 [ train  ][ emb ][ val ]
    fold 1 (anchored):  [ train from warm-up   ][ emb ][ val ]

Purging: training windows end ``embargo_bars`` before their validation starts, so
no n-step return, reward or label computed inside a training window can reach a
validation bar when ``embargo_bars`` is at least the longest such horizon. No
validation bar is ever inside its own or an earlier fold's training window.
"""

from __future__ import annotations

import attrs
import numpy as np

from foxhunt.errors import DataError

__all__ = ["FoldConfig", "Fold", "FoldRow", "make_folds", "describe_folds", "bars_needed"]

MODES = ("anchored", "rolling")


def _at_least(minimum: int):
    def check(instance: object, attribute: attrs.Attribute, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"folds.{attribute.name} must be an integer >= {minimum}, got {value!r}")

    return check


@attrs.frozen
class FoldConfig:
    """Walk-forward layout.

    ``train_bars`` is the training window length (exact when rolling, the minimum
    when anchored, where training always starts at the warm-up). ``embargo_bars``
    separates training from validation; make it at least the longest n-step or
    reward horizon the learner uses.
    """

    n_folds: int = attrs.field(default=3, validator=_at_least(1))
    train_bars: int = attrs.field(default=2000, validator=_at_least(2))
    validation_bars: int = attrs.field(default=500, validator=_at_least(2))
    embargo_bars: int = attrs.field(default=24, validator=_at_least(0))
    mode: str = attrs.field(default="rolling", validator=attrs.validators.in_(MODES))


@attrs.frozen
class Fold:
    """Bar index ranges of one fold (into the market's bars)."""

    index: int
    train: range
    embargo: range
    validation: range

    @property
    def train_slice(self) -> slice:
        return slice(self.train.start, self.train.stop)

    @property
    def validation_slice(self) -> slice:
        return slice(self.validation.start, self.validation.stop)


def bars_needed(config: FoldConfig, warmup: int) -> int:
    """Fewest bars the layout fits in: warm-up + train + embargo + n_folds * validation."""
    return warmup + config.train_bars + config.embargo_bars + config.n_folds * config.validation_bars


def make_folds(n_bars: int, config: FoldConfig, warmup: int = 0) -> list[Fold]:
    """The folds for ``n_bars`` bars whose features are defined from bar ``warmup`` on."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    needed = bars_needed(config, warmup)
    if n_bars < needed:
        raise DataError(
            f"the data has {n_bars} bars but {config.n_folds} fold(s) need at least {needed}: warm-up {warmup} + "
            f"train {config.train_bars} + embargo {config.embargo_bars} + {config.n_folds} x validation "
            f"{config.validation_bars}. Load more data, or lower folds.n_folds, train_bars or validation_bars"
        )
    first_validation = n_bars - config.n_folds * config.validation_bars
    folds = []
    for k in range(config.n_folds):
        validation_start = first_validation + k * config.validation_bars
        train_stop = validation_start - config.embargo_bars
        train_start = warmup if config.mode == "anchored" else train_stop - config.train_bars
        folds.append(
            Fold(
                index=k,
                train=range(train_start, train_stop),
                embargo=range(train_stop, validation_start),
                validation=range(validation_start, validation_start + config.validation_bars),
            )
        )
    return folds


@attrs.frozen
class FoldRow:
    """One printable row of the fold table shown at the start of a run."""

    fold: int
    train_start: str
    train_end: str
    validation_start: str
    validation_end: str
    train_bars: int
    embargo_bars: int
    validation_bars: int


def _stamp(timestamps: np.ndarray, index: int) -> str:
    value = timestamps[index].astype("datetime64[m]")
    text = str(value).replace("T", " ")
    return text[:10] if text.endswith("00:00") else text


def describe_folds(folds: list[Fold], timestamps: np.ndarray) -> list[FoldRow]:
    """Rows with first/last dates (UTC; the time is shown for intraday bars) and sizes of each window."""
    return [
        FoldRow(
            fold=fold.index,
            train_start=_stamp(timestamps, fold.train.start),
            train_end=_stamp(timestamps, fold.train.stop - 1),
            validation_start=_stamp(timestamps, fold.validation.start),
            validation_end=_stamp(timestamps, fold.validation.stop - 1),
            train_bars=len(fold.train),
            embargo_bars=len(fold.embargo),
            validation_bars=len(fold.validation),
        )
        for fold in folds
    ]
