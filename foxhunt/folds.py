"""Purged, embargoed walk-forward folds: train, then validation (selection), then test (reported).

Each fold trains on a window, skips an embargo, validates on the window after it
(epochs and models are chosen there), skips a second embargo, and is tested on
the window after that; only the test figures are reported as out-of-sample. The
next fold's test window follows the previous one, and the folds are placed so
that the last test window ends at the last bar (the most recent data is tested
on)::

    bars: | warm-up | .... | train 0 |e| val 0 |e| test 0 | test 1 | test 2 |
    fold 0:                [ train  ][e][ val ][e][ test ]
    fold 1 (rolling):               [ train  ][e][ val ][e][ test ]
    fold 1 (anchored): [ train from warm-up ][e][ val ][e][ test ]

Purging: a training window ends ``embargo_bars`` before its validation window
starts, and the validation window ends ``embargo_bars`` before the test window
starts, so no n-step return, reward or label computed inside one window can
reach the next when ``embargo_bars`` is at least the longest such horizon. No
validation or test bar is ever inside its own or an earlier fold's training
window, and no test bar is inside its own or an earlier fold's validation
window. A later fold may train on an earlier fold's test bars: that fold's
figures were already taken, by a policy that never saw them.
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

    ``mode`` is ``"anchored"`` (each fold trains from the warm-up to its
    validation window: a slow signal needs every bar) or ``"rolling"`` (the
    ``train_bars`` bars just before it, for a market whose old bars no longer
    describe it). ``train_bars`` is the training window length (exact when
    rolling, the minimum when anchored).
    ``validation_bars`` is the window each fold's best epoch is chosen on,
    ``test_bars`` the window its chosen policy is then reported on.
    ``embargo_bars`` separates training from validation and validation from
    test; make it at least the longest n-step or reward horizon the learner uses.
    ``only`` trains and tests fold ``only`` alone (0-based, below ``n_folds``): the
    windows stay where the whole walk-forward puts them, so the folds of one
    layout can run as separate runs (``foxhunt sweep``) and still be compared.
    """

    n_folds: int = attrs.field(default=3, validator=_at_least(1))
    train_bars: int = attrs.field(default=2000, validator=_at_least(2))
    validation_bars: int = attrs.field(default=500, validator=_at_least(2))
    test_bars: int = attrs.field(default=500, validator=_at_least(2))
    embargo_bars: int = attrs.field(default=24, validator=_at_least(0))
    mode: str = attrs.field(default="anchored", validator=attrs.validators.in_(MODES))
    only: int | None = attrs.field(default=None, validator=attrs.validators.optional(_at_least(0)))

    def __attrs_post_init__(self) -> None:
        # a validator sees one field at a time; this rule ties two together
        if self.only is not None and self.only >= self.n_folds:
            raise ValueError(f"'only' must name one of the {self.n_folds} folds (0 to {self.n_folds - 1}), "
                             f"got {self.only}")

    def selected(self) -> range:
        """The indices of the folds a run trains: every fold, or just ``only``."""
        return range(self.n_folds) if self.only is None else range(self.only, self.only + 1)


@attrs.frozen
class Fold:
    """Bar index ranges of one fold (into the market's bars), in time order."""

    index: int
    train: range
    embargo: range
    validation: range
    test_embargo: range
    test: range

    @property
    def train_slice(self) -> slice:
        return slice(self.train.start, self.train.stop)

    @property
    def validation_slice(self) -> slice:
        return slice(self.validation.start, self.validation.stop)

    @property
    def test_slice(self) -> slice:
        return slice(self.test.start, self.test.stop)


def bars_needed(config: FoldConfig, warmup: int) -> int:
    """Fewest bars the layout fits in: warm-up + train + embargo + validation + embargo + n_folds * test."""
    return (
        warmup + config.train_bars + config.embargo_bars + config.validation_bars + config.embargo_bars
        + config.n_folds * config.test_bars
    )


def make_folds(n_bars: int, config: FoldConfig, warmup: int = 0) -> list[Fold]:
    """The folds for ``n_bars`` bars whose features are defined from bar ``warmup`` on."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    needed = bars_needed(config, warmup)
    if n_bars < needed:
        raise DataError(
            f"the data has {n_bars} bars but {config.n_folds} fold(s) need at least {needed}: warm-up {warmup} + "
            f"train {config.train_bars} + embargo {config.embargo_bars} + validation {config.validation_bars} + "
            f"embargo {config.embargo_bars} + {config.n_folds} x test {config.test_bars}. Load more data, or lower "
            "folds.n_folds, train_bars, validation_bars, test_bars or embargo_bars"
        )
    first_test = n_bars - config.n_folds * config.test_bars
    folds = []
    for k in range(config.n_folds):
        test_start = first_test + k * config.test_bars
        validation_stop = test_start - config.embargo_bars
        validation_start = validation_stop - config.validation_bars
        train_stop = validation_start - config.embargo_bars
        train_start = warmup if config.mode == "anchored" else train_stop - config.train_bars
        folds.append(
            Fold(
                index=k,
                train=range(train_start, train_stop),
                embargo=range(train_stop, validation_start),
                validation=range(validation_start, validation_stop),
                test_embargo=range(validation_stop, test_start),
                test=range(test_start, test_start + config.test_bars),
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
    test_start: str
    test_end: str
    train_bars: int
    embargo_bars: int
    validation_bars: int
    test_bars: int


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
            test_start=_stamp(timestamps, fold.test.start),
            test_end=_stamp(timestamps, fold.test.stop - 1),
            train_bars=len(fold.train),
            embargo_bars=len(fold.embargo),
            validation_bars=len(fold.validation),
            test_bars=len(fold.test),
        )
        for fold in folds
    ]
