"""foxhunt.testing.learning_check: the checks' configs and the measure each reports (no training here: the
learning-quality test and tests/benchmarks/test_learning_check_script.py run them)."""

from __future__ import annotations

import attrs
import pytest

from foxhunt.testing.learning_check import CHECKS, Check, CheckRun, short_config


def test_a_check_refuses_a_measure_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="measure"):
        Check("mine", "synthetic:trend?bars=2000", (1,), measure="sharpe")


def test_the_ar1_check_trains_one_fold_one_epoch_and_tests_on_3000_bars_at_a_discount_of_0_8() -> None:
    check = CHECKS["ar1"]
    config = short_config(7, check.source, check.overrides)
    assert config.data.source == "synthetic:ar1?phi=0.2&bars=4400&seed=7"
    assert (config.run.seed, config.run.device) == (7, "cpu")
    assert (config.folds.n_folds, config.folds.train_bars, config.folds.test_bars) == (1, 1150, 3000)
    assert config.train.epochs == 1
    gamma = config.plugins.settings["gamma"]
    assert list(gamma["minimum"]) == list(gamma["maximum"]) == [0.8] * 4


def test_overrides_after_the_checks_own_win() -> None:
    check = CHECKS["ar1"]
    config = short_config(1, check.source, [*check.overrides, "folds.test_bars=200"])
    assert config.folds.test_bars == 200


def run(**changes) -> CheckRun:
    base = CheckRun("ar1", 3, agent_sharpe=2.0, round_trips=10, turnover=50.0, oracle_sharpe=8.0,
                    churner_turnover=None, window=(1250, 4250), seconds=1.0)
    return attrs.evolve(base, **changes)


def test_a_signal_run_reports_agent_over_oracle_and_a_walk_turnover_over_the_churners() -> None:
    assert run().value == pytest.approx(0.25)
    walk = run(check="randomwalk", oracle_sharpe=None, churner_turnover=400.0)
    assert walk.value == pytest.approx(50.0 / 400.0)
    # in learning.py's shape, the walk's flat oracle reads as a Sharpe of 0: learning_compare pairs round trips
    assert walk.as_learning_run()["oracle"] == {"sharpe": 0.0}
    assert run().as_learning_run()["agent"] == {"sharpe": 2.0, "round_trips": 10, "turnover": 50.0}
