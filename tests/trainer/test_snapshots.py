"""``[train] policy_epochs``: the fold's policy averages its best epochs, is reported as such, and resumes exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_testkit import TINY, TINY_DATA, StopAfter, read_summary

from foxhunt.checkpoint_backtest import backtest_checkpoint
from foxhunt.config import load_config
from foxhunt.errors import CheckpointError, ConfigError
from foxhunt.trainer.resume import RESUME_NAME
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

# Three epochs, the best two averaged; enough updates at this learning rate that fold 0's epochs validate
# apart (measured with rolling folds: Sharpe 1.35, -2.75 and 0.00), so the choice and the average are both visible.
AVERAGING = (*TINY, "train.epochs=3", "train.policy_epochs=2", "train.updates_per_epoch=40", "learner.lr=1e-3",
             'folds.mode="rolling"')


def config():
    return load_config(None, [*AVERAGING, f'data.source="{TINY_DATA}"', 'run.device="cpu"'])


@pytest.fixture(scope="module")
def averaged_run(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    path = tmp_path_factory.mktemp("averaged") / "run"
    assert Trainer(config(), RunDirectory(path), show_progress=False).run() is not None
    return path


def epoch_rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def test_each_fold_averages_its_two_best_epochs_by_validation(averaged_run: Path) -> None:
    rows = epoch_rows(averaged_run)
    for fold in read_summary(averaged_run)["folds"]:
        sharpes = [row["validation"]["sharpe"] for row in rows if row["fold"] == fold["fold"]]
        # best first; a tie keeps the earlier epoch ahead, as the single best epoch's rule does
        ranked = sorted(range(len(sharpes)), key=lambda epoch: -sharpes[epoch])[:2]
        assert fold["policy_epochs"] == ranked
        assert fold["best_epoch"] == ranked[0]
        metadata = json.loads((averaged_run / "checkpoints" / f"fold_{fold['fold']}" / "metadata.json").read_text())
        assert metadata["epoch"] == ranked[0]
        assert [member["epoch"] for member in metadata["members"]] == ranked[1:]
    first = read_summary(averaged_run)["folds"][0]
    assert first["policy_epochs"] == [0, 2]  # fold 0's epochs validated at 1.35, -2.75 and 0.00


@pytest.mark.parametrize("fold", [0, 1])
def test_reported_figures_are_backtests_of_the_averaged_checkpoint(averaged_run: Path, fold: int) -> None:
    reported = read_summary(averaged_run)["folds"][fold]
    for window in ("test", "validation"):
        outcome = backtest_checkpoint(averaged_run / "checkpoints" / f"fold_{fold}", window=window)
        assert list(outcome.window) == reported[f"{window}_window"]
        assert outcome.metrics["agent"] == reported[window]["agent"], window


def test_the_averaged_validation_figure_is_the_averages_not_its_best_epochs(averaged_run: Path) -> None:
    """Fold 0's two epochs validated at Sharpe 1.35 and 0.00 (no trade); together they traded, at a third figure."""
    fold = read_summary(averaged_run)["folds"][0]
    members = {row["epoch"]: row["validation"]["sharpe"] for row in epoch_rows(averaged_run) if row["fold"] == 0}
    assert fold["validation"]["agent"]["sharpe"] not in {members[epoch] for epoch in fold["policy_epochs"]}


def test_a_finished_run_keeps_only_the_fold_checkpoints(averaged_run: Path) -> None:
    assert sorted(p.name for p in (averaged_run / "checkpoints").iterdir()) == ["fold_0", "fold_1"]


@pytest.mark.parametrize("stop_after", [1, 2, 4], ids=["after-epoch-0", "after-epoch-1", "inside-the-last-fold"])
def test_stop_and_resume_ends_with_the_uninterrupted_run(averaged_run: Path, tmp_path: Path, stop_after: int) -> None:
    path = tmp_path / "run"
    assert Trainer(config(), RunDirectory(path), stop=StopAfter(path, stop_after), show_progress=False).run() is None
    kept = sorted(p.name for p in (path / "checkpoints").iterdir())
    assert RESUME_NAME in kept and any(".epoch_" in name for name in kept)  # the ranked epochs' own files
    assert Trainer(config(), RunDirectory(path, resume=True), show_progress=False).run(resume_from=path) is not None
    assert (path / "summary.json").read_bytes() == (averaged_run / "summary.json").read_bytes()
    for fold in (0, 1):
        name = f"checkpoints/fold_{fold}/tensors.safetensors"
        assert (path / name).read_bytes() == (averaged_run / name).read_bytes()
    assert sorted(p.name for p in (path / "checkpoints").iterdir()) == ["fold_0", "fold_1"]


def test_resume_refuses_a_listed_epoch_whose_file_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "run"
    assert Trainer(config(), RunDirectory(path), stop=StopAfter(path, 2), show_progress=False).run() is None
    epoch_file = path / "checkpoints" / "fold_0.epoch_1"
    assert epoch_file.is_dir()
    for item in epoch_file.iterdir():
        item.unlink()
    epoch_file.rmdir()
    with pytest.raises(CheckpointError, match=r"fold_0\.epoch_1: missing; the resume position lists epoch 1"):
        Trainer(config(), RunDirectory(path, resume=True), show_progress=False).run(resume_from=path)


def test_policy_epochs_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="policy_epochs"):
        load_config(None, ["train.policy_epochs=0"])
