"""``[train] burn_in_epochs``: epochs on the run's first fold before its own, trained as its epochs are, never
validated or selected; later folds have none, and a stopped run resumes to the uninterrupted result."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from structlog.testing import capture_logs
from trainer_testkit import (StopAfter, metric_rows, network_copy, record_entered_folds, record_fold_starts,
                             tiny_trainer_config)

from foxhunt.errors import ConfigError
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

BURN_IN = "train.burn_in_epochs=2"  # as many as the tiny run's epochs (train.epochs=2)


def test_burn_in_epochs_train_as_the_folds_own_epochs_and_the_fold_starts_from_what_they_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The network each fold boundary starts from, recorded before the boundary resets the fold's state.
    at_fold_starts = record_fold_starts(monkeypatch)
    # The plain run's network after the first fold's last epoch: what the burn-in's two epochs should also leave.
    after_first_fold: list[dict[str, torch.Tensor]] = []
    plain = Trainer(tiny_trainer_config("folds.only=0"), RunDirectory(tmp_path / "plain"), show_progress=False,
                    on_epoch=lambda fold, epoch, _: after_first_fold.append(network_copy(plain)) if epoch == 1 else None)
    plain.run()
    initial = at_fold_starts[0]
    at_fold_starts.clear()

    entered = record_entered_folds(monkeypatch)  # each fold's data is prepared once: the burn-in's boundary reuses the first fold's
    with capture_logs() as logs:
        Trainer(tiny_trainer_config(BURN_IN), RunDirectory(tmp_path / "burned"), show_progress=False).run()
    assert entered == [0, 1]
    assert len(at_fold_starts) == 3  # the burn-in's start, then each of the two folds'
    assert all(torch.equal(at_fold_starts[0][name], initial[name]) for name in initial)
    trained = at_fold_starts[1]
    assert any(not torch.equal(trained[name], initial[name]) for name in initial)
    assert all(torch.equal(trained[name], after_first_fold[0][name]) for name in trained)
    burn_in = [entry for entry in logs if entry["event"] == "burn-in epoch done"]
    plain_epochs = [(row["epoch"], row["updates"]) for row in metric_rows(tmp_path / "plain")]
    assert [(entry["epoch"], entry["updates"]) for entry in burn_in] == plain_epochs  # the first fold's only


def test_burn_in_epochs_are_neither_validated_nor_selected(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # three burn-in epochs before the fold's two: a selectable burn-in epoch 2 would show as best_epoch 2
    summary = Trainer(tiny_trainer_config("train.burn_in_epochs=3"), RunDirectory(run), show_progress=False).run()
    rows = metric_rows(run)
    assert [(row["fold"], row["epoch"]) for row in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for fold in summary["folds"]:
        chosen = next(row for row in rows if (row["fold"], row["epoch"]) == (fold["fold"], fold["best_epoch"]))
        assert chosen["validation"]["sharpe"] == fold["validation"]["agent"]["sharpe"]


def test_a_run_stopped_after_the_burn_in_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    config = tiny_trainer_config(BURN_IN)
    whole = tmp_path / "whole"
    Trainer(config, RunDirectory(whole), show_progress=False).run()
    path = tmp_path / "run"
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    with capture_logs() as logs:
        Trainer(config, RunDirectory(path, resume=True), show_progress=False).run(resume_from=path)
    assert not [entry for entry in logs if entry["event"] == "burn-in epoch done"]  # the networks were restored
    assert (path / "summary.json").read_bytes() == (whole / "summary.json").read_bytes()
    assert [row["validation"] for row in metric_rows(path)] == [row["validation"] for row in metric_rows(whole)]


def test_a_negative_burn_in_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="train.burn_in_epochs"):
        tiny_trainer_config("train.burn_in_epochs=-1")
