"""A fold's reported figures: its selected checkpoint backtested once on the held-out test window.

The trainer calls :func:`fold_result` after the fold's last epoch. The checkpoint is read back from its file
(``resume.saved_policy``), not taken from the live learner, so the test figure is the saved policy's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from foxhunt.folds import Fold
from foxhunt.policy import MEMBERS_KEY
from foxhunt.trainer import evaluation, resume

if TYPE_CHECKING:
    from foxhunt.trainer.trainer import Trainer

__all__ = ["fold_result"]

log = structlog.get_logger(__name__)


def fold_result(trainer: Trainer, fold: Fold, best: dict[str, Any], retries: int) -> dict[str, Any]:
    """The fold's figures: its selected checkpoint backtested once on the test window (reported), beside the
    validation figures it was selected by. Baselines are backtested on both windows. A checkpoint that
    averages several epochs ([train] policy_epochs) is backtested on the validation window too: its
    validation figures are the average's, not its best epoch's. Writes the fold's equity curves.
    ``retries``: the flat-fold retries the fold trained ([train] flat_fold_retries)."""
    market, backtests, features = trainer.data.market, trainer.backtests, trainer.features
    test_window = (fold.test.start, fold.test.stop)
    saved = resume.saved_policy(trainer, fold)
    epochs = [saved.metadata["epoch"], *(member["epoch"] for member in saved.metadata.get(MEMBERS_KEY, []))]
    if saved.members:
        averaged = backtests.agent(saved.act_values, features, (fold.validation.start, fold.validation.stop),
                                   trainer.device)
        best = {**best, "agent": evaluation.metrics_of(averaged), "equity": averaged.equity.tolist()}
    if best["agent"]["fills"] == 0:
        # A fold that never trades is silent otherwise: its test figures read 0.00, as a flat market's would.
        log.warning("fold policy made no trade on validation", fold=fold.index, epoch=best["epoch"],
                    meaning="its test window is held flat or nearly; where the market has a signal this is a "
                    "collapse, most often in the first fold (docs/learner.md, 'The first fold on the GPU'); "
                    "train.flat_fold_retries trains such a fold again (docs/learner.md, 'Retrying a flat fold')")
    test_agent = backtests.agent(saved.act_values, features, test_window, trainer.device)
    test = {"agent": test_agent, **backtests.baselines(features, test_window)}
    validation_baselines = trainer.validation_baselines
    curves = {
        "validation": {"agent": best["equity"], **{name: r.equity.tolist() for name, r in validation_baselines.items()}},
        "test": {name: result.equity.tolist() for name, result in test.items()},
    }
    # equity[i] is the portfolio after bar window.start + i (equity[0]: the initial cash at the first bar)
    for window, bars in (("test", fold.test), ("validation", fold.validation)):
        timestamps = market.timestamps[bars.start : bars.stop].astype(str).tolist()
        trainer.run_dir.write_equity(fold.index, timestamps[: len(curves[window]["agent"])], curves[window], window)
    log.info("fold tested", best_epoch=best["epoch"], validation_sharpe=best["agent"]["sharpe"],
             test_sharpe=test["agent"].sharpe)
    return {
        "fold": fold.index,
        "best_epoch": best["epoch"],
        "policy_epochs": epochs,  # the epochs the fold's policy averages, best first (one without policy_epochs)
        "flat_fold_retries": retries,
        "train_window": [fold.train.start, fold.train.stop],
        "validation_window": [fold.validation.start, fold.validation.stop],
        "test_window": [fold.test.start, fold.test.stop],
        "validation": {"agent": best["agent"], **{n: evaluation.metrics_of(r) for n, r in validation_baselines.items()}},
        "test": {name: evaluation.metrics_of(result) for name, result in test.items()},
        "curves": curves,
    }
