"""The epoch reporter on real Optuna trials: steps, pruning by the median pruner, the objective."""

from __future__ import annotations

import optuna
import pytest

from foxhunt.trainer.interrupt import StopFlag
from foxhunt.tune.objective import EpochReporter, TrialStop, direction_of

EPOCHS = 2


def median_study() -> optuna.Study:
    pruner = optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0)
    return optuna.create_study(direction="maximize", pruner=pruner)


def report_all(reporter: EpochReporter, values: list[float], metric: str = "sharpe") -> None:
    """Feed ``values`` as folds x epochs, stopping as the trainer would once a stop is requested."""
    for step, value in enumerate(values):
        reporter(step // EPOCHS, step % EPOCHS, {metric: value, "net_pnl": 0.0})
        if reporter.stop.requested:
            return


def test_steps_count_epochs_over_folds_and_the_objective_is_the_mean_of_fold_bests() -> None:
    study = median_study()
    trial = study.ask()
    reporter = EpochReporter(trial, "sharpe", EPOCHS, TrialStop())
    report_all(reporter, [1.0, 3.0, -2.0, -1.0])
    study.tell(trial, reporter.objective())
    frozen = study.trials[0]
    assert frozen.intermediate_values == {0: 1.0, 1: 3.0, 2: -2.0, 3: -1.0}
    assert reporter.fold_best == {0: 3.0, 1: -1.0}
    assert frozen.value == pytest.approx(1.0)
    assert reporter.last_step == 3


def test_a_trial_worse_than_the_median_is_pruned_and_asks_its_run_to_stop() -> None:
    study = median_study()
    first = study.ask()
    good = EpochReporter(first, "sharpe", EPOCHS, TrialStop())
    report_all(good, [1.0, 2.0, 1.5, 2.5])
    assert not good.stop.requested
    study.tell(first, good.objective())

    worse = study.ask()
    bad = EpochReporter(worse, "sharpe", EPOCHS, TrialStop())
    report_all(bad, [0.5, 3.0, 3.0, 3.0])
    assert bad.stop.pruned and bad.stop.requested
    assert bad.last_step == 0  # the run was asked to stop after its first epoch
    study.tell(worse, state=optuna.trial.TrialState.PRUNED)

    better = study.ask()
    fine = EpochReporter(better, "sharpe", EPOCHS, TrialStop())
    report_all(fine, [1.2, 2.1, 1.6, 2.6])
    assert not fine.stop.requested
    study.tell(better, fine.objective())
    assert [t.state for t in study.trials] == [
        optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.COMPLETE,
    ]


def test_drawdown_is_minimised_and_its_fold_best_is_the_smallest() -> None:
    assert direction_of("max_drawdown") == "minimize"
    assert {direction_of(m) for m in ("sharpe", "sortino", "net_pnl", "calmar")} == {"maximize"}
    study = optuna.create_study(direction="minimize", pruner=optuna.pruners.NopPruner())
    reporter = EpochReporter(study.ask(), "max_drawdown", EPOCHS, TrialStop())
    report_all(reporter, [0.3, 0.1, 0.2, 0.4], metric="max_drawdown")
    assert reporter.fold_best == {0: 0.1, 1: 0.2}
    assert reporter.objective() == pytest.approx(0.15)


def test_no_report_means_no_objective() -> None:
    reporter = EpochReporter(optuna.create_study().ask(), "sharpe", EPOCHS, TrialStop())
    with pytest.raises(ValueError, match="no epoch was reported"):
        reporter.objective()


def test_a_user_stop_requests_a_stop_without_pruning() -> None:
    with StopFlag() as user:
        stop = TrialStop(user)
        assert not stop.requested
        user.request("test")
        assert stop.requested and stop.interrupted and not stop.pruned
