"""A run's metrics against its bands, epoch by epoch: patience, NaN at once, epochs beyond the file
(:mod:`foxhunt.trainer.band_watch`; the run itself: tests/cli/test_bands_commands.py)."""

from __future__ import annotations

import math

from structlog.testing import capture_logs

from foxhunt.trainer.band_watch import BandWatch
from foxhunt.trainer.bands import BANDS_VERSION, BandsFile, EpochBands

METRICS = ["losses.c51", "validation.sharpe"]


def watch(patience: int = 2, folds: int = 2, epochs: int = 3) -> BandWatch:
    """Bands of 1.0 +/- 0.3 for the loss and 0.0 +/- 0.3 for the Sharpe ratio at every (fold, epoch) given."""
    table = [EpochBands(fold, epoch, {"losses.c51": 1.0, "validation.sharpe": 0.0},
                        {"losses.c51": 0.1, "validation.sharpe": 0.1})
             for fold in range(folds) for epoch in range(epochs)]
    return BandWatch(BandsFile(BANDS_VERSION, 3.0, patience, 0.01, 1e-6, METRICS, ["a", "b"], table), "bands.toml")


def row(loss: float = 1.0, sharpe: float = 0.0) -> dict:
    return {"losses": {"c51": loss}, "validation": {"sharpe": sharpe}, "seconds": 99.0}


def test_one_epoch_out_of_band_does_not_stop_with_patience_two() -> None:
    bands = watch(patience=2)
    with capture_logs() as logs:
        assert bands.check(0, 0, row(loss=5.0)) is None
        assert bands.check(0, 1, row()) is None  # back in band: the count starts again
        assert bands.check(0, 2, row(loss=5.0)) is None
    assert [log["metric"] for log in logs if log["event"] == "out of band"] == ["losses.c51", "losses.c51"]
    assert all(log["consecutive"] == 1 for log in logs if log["event"] == "out of band")


def test_patience_consecutive_epochs_out_of_band_stop_across_a_fold_boundary() -> None:
    bands = watch(patience=2)
    assert bands.check(0, 2, row(sharpe=-1.0)) is None
    breach = bands.check(1, 0, row(sharpe=-1.0))
    assert breach is not None
    assert (breach.metric, breach.value, breach.fold, breach.epoch) == ("validation.sharpe", -1.0, 1, 0)
    assert (breach.low, breach.high) == (-0.30000000000000004, 0.30000000000000004)
    assert breach.epochs == ((0, 2), (1, 0)) and breach.reason == "out of band"
    record = breach.record()
    assert record["band"] == [breach.low, breach.high] and record["epochs"] == [[0, 2], [1, 0]]
    assert "bands.toml: validation.sharpe = -1 is outside its band" in record["message"]
    assert "2 consecutive epochs (patience 2: fold 0 epoch 2, fold 1 epoch 0)" in record["message"]


def test_patience_three_needs_three() -> None:
    bands = watch(patience=3)
    assert bands.check(0, 0, row(loss=0.0)) is None
    assert bands.check(0, 1, row(loss=0.0)) is None
    assert bands.check(0, 2, row(loss=0.0)).epochs == ((0, 0), (0, 1), (0, 2))


def test_nan_or_infinity_stops_at_once_whatever_the_patience() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        breach = watch(patience=5).check(0, 0, row(sharpe=bad))
        assert breach is not None and breach.reason == "not finite" and breach.epochs == ((0, 0),)
        assert breach.record()["value"] == str(bad)  # JSON has no NaN: kept as its text
        assert "validation.sharpe is" in breach.message and "(not finite) in fold 0, epoch 0" in breach.message


def test_epochs_beyond_the_file_are_not_checked_and_that_is_logged_once() -> None:
    bands = watch(patience=1, folds=1, epochs=2)
    with capture_logs() as logs:
        assert bands.check(0, 1, row()) is None
        assert bands.check(0, 2, row(loss=50.0)) is None
        assert bands.check(1, 0, row(loss=math.nan)) is None
    beyond = [log for log in logs if "beyond the bands file" in log["event"]]
    assert len(beyond) == 1 and (beyond[0]["fold"], beyond[0]["epoch"]) == (0, 2)
