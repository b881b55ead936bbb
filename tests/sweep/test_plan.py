"""Trials of a plan: variants x seeds x folds, each the base config plus its overrides; plan.json round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from foxhunt.errors import FoxhuntError
from foxhunt.sweep.driver import start_sweep
from foxhunt.sweep.plan import make_plan, read_plan
from foxhunt.sweep.spec import SweepSpec, parse_spec


def test_trials_are_every_variant_seed_and_fold_each_on_its_own_seed_and_fold(base_config: str) -> None:
    plan = make_plan(base_config, parse_spec({"seeds": 2, "grid": {"learner.lr": [1e-4, 3e-4]}}, "t"))
    assert [t.name for t in plan.trials][:4] == ["v0_seed0_fold0", "v0_seed0_fold1", "v0_seed0_fold2",
                                                  "v0_seed1_fold0"]
    assert len(plan.trials) == 2 * 2 * 3
    config = plan.trial_config(plan.trial("v1_seed1_fold2"))
    assert (config.learner.lr, config.run.seed, config.folds.only, config.folds.n_folds) == (3e-4, 1, 2, 3)


def test_one_variant_has_no_prefix_and_folds_can_be_chosen(base_config: str) -> None:
    plan = make_plan(base_config, SweepSpec(seeds=1, folds=[2]))
    assert [t.name for t in plan.trials] == ["seed0_fold2"]


def test_the_plan_is_read_back_as_written_and_a_sweep_is_never_started_twice(tmp_path: Path, base_config: str) -> None:
    plan = start_sweep(tmp_path / "s", base_config, parse_spec({"seeds": 1, "folds": [0]}, "t"), reports=False)
    assert read_plan(tmp_path / "s") == plan
    with pytest.raises(FoxhuntError, match=r"already holds a sweep; continue it with `foxhunt sweep --retry"):
        start_sweep(tmp_path / "s", base_config, SweepSpec())
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FoxhuntError, match=r"is not empty and holds no sweep"):
        start_sweep(tmp_path / "other", base_config, SweepSpec())


def test_a_damaged_plan_is_one_paragraph(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text("{not json")
    with pytest.raises(FoxhuntError, match=r"plan.json: cannot read the sweep plan"):
        read_plan(tmp_path)
    with pytest.raises(FoxhuntError, match=r"no plan.json; is this a folder `foxhunt sweep` wrote"):
        read_plan(tmp_path / "missing")


def test_a_retry_never_deletes_a_trial_that_a_live_process_still_trains(tmp_path: Path, base_config: str) -> None:
    from foxhunt.sweep.driver import run_pending
    from foxhunt.sweep.local import LocalExecutor
    from foxhunt.trainer.run_lock import RunLock, RunLocked

    directory = tmp_path / "s"
    start_sweep(directory, base_config, SweepSpec(seeds=1, folds=[0]), reports=False)
    (directory / "seed0_fold0").mkdir()
    held = RunLock(directory / "seed0_fold0")
    held.acquire()  # as a trial process left running by a killed driver holds it
    try:
        with pytest.raises(RunLocked, match=r"seed0_fold0 is being written by another foxhunt process"):
            run_pending(directory, LocalExecutor())
        assert (directory / "seed0_fold0").is_dir()
    finally:
        held.release()
