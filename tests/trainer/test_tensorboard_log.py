"""``[run] tensorboard = true``: a run's per-epoch metrics as TensorBoard scalars, read back as TensorBoard reads them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from foxhunt.errors import FoxhuntError
from foxhunt.trainer.tensorboard_log import TENSORBOARD_DIR, TensorBoardLog, epoch_scalars
from trainer_testkit import TINY, TINY_DATA, StopAfter, invoke, train_args

from foxhunt.config import load_config
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

ONE_FOLD = (*TINY, "folds.n_folds=1", "run.tensorboard=true")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    out = tmp_path_factory.mktemp("tensorboard") / "run"
    result = invoke(*train_args(out, ONE_FOLD))
    assert result.exit_code == 0, result.output + result.stderr
    return out


def events(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar event as TensorBoard shows it, ``(step, value)`` per tag (purged events left out)."""
    accumulator = event_accumulator.EventAccumulator(str(run_dir / TENSORBOARD_DIR), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    return {tag: dict(found) for tag, found in events(run_dir).items()}


def test_each_epochs_validation_sharpe_and_losses_are_scalars(run_dir: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    found = scalars(run_dir)
    assert len(rows) == 2
    for row in rows:
        step = row["epoch"]  # one fold: the step is the epoch
        assert found["validation/sharpe"][step] == pytest.approx(row["validation"]["sharpe"], rel=1e-6, abs=1e-6)
        assert row["losses"]
        for component, loss in row["losses"].items():
            assert found[f"losses/{component}"][step] == pytest.approx(loss, rel=1e-6, abs=1e-6)
    assert "train/env_steps_per_s" in found and any(tag.startswith("adaptive/") for tag in found)


def test_the_folder_comes_with_the_first_epoch(tmp_path: Path) -> None:
    log = TensorBoardLog(tmp_path / TENSORBOARD_DIR, epochs_per_fold=3)
    log.close()
    assert not (tmp_path / TENSORBOARD_DIR).exists()  # a run that fails before its first epoch leaves none


def test_steps_run_on_across_folds() -> None:
    log = TensorBoardLog(Path("unused"), epochs_per_fold=4)
    assert [log.step({"fold": fold, "epoch": epoch}) for fold, epoch in ((0, 0), (0, 3), (1, 0), (2, 1))] == [0, 3, 4, 9]


def test_only_finite_numbers_become_scalars() -> None:
    row = {"validation": {"sharpe": 1.5, "note": "x", "bad": float("nan")}, "losses": {"c51": 2.0},
           "adaptive": {"tau.value": 0.1, "epsilon.branch": [0.1, 0.2]}, "updates": 12, "first_update_seconds": None,
           "fold": 0, "epoch": 1}
    assert epoch_scalars(row) == {"validation/sharpe": 1.5, "losses/c51": 2.0, "adaptive/tau.value": 0.1,
                                  "adaptive/epsilon.branch/0": 0.1, "adaptive/epsilon.branch/1": 0.2,
                                  "train/updates": 12.0}


def test_without_tensorboard_installed_the_run_is_refused_saying_what_to_install(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if not installed
    with pytest.raises(FoxhuntError, match=r"foxhunt\[tensorboard\]"):
        TensorBoardLog(tmp_path, epochs_per_fold=1)


def test_a_resumed_run_shows_each_epoch_once(tmp_path: Path, _private_feature_cache: Path) -> None:
    """Killed after epoch 1's scalars were written but before its resume checkpoint: the resumed run trains epoch 1
    again, and its writer purges the stale step."""
    path = tmp_path / "run"
    config = load_config(None, [*ONE_FOLD, f'data.source="{TINY_DATA}"', 'run.device="cpu"'])
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(log_dir=str(path / TENSORBOARD_DIR)) as stale:  # what the killed process had written
        stale.add_scalar("validation/sharpe", 999.0, 1)
    result = invoke("train", "--resume", str(path), "--no-progress")
    assert result.exit_code == 0, result.output + result.stderr
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert [step for step, _ in events(path)["validation/sharpe"]] == [0, 1]
    assert [value for _, value in events(path)["validation/sharpe"]] == pytest.approx(
        [row["validation"]["sharpe"] for row in rows], rel=1e-6, abs=1e-6)


def test_a_retried_folds_epochs_and_the_next_folds_have_steps_of_their_own(tmp_path: Path) -> None:
    # [train] flat_fold_retries = 1: the tiny run's folds end flat on validation, so each trains 2 + 2 epochs; the
    # steps count in most_fold_epochs (4), so fold 1 starts at step 4, after fold 0's retried epochs 2 and 3
    path = tmp_path / "run"
    config = load_config(None, [*TINY, "run.tensorboard=true", "train.flat_fold_retries=1", f'data.source="{TINY_DATA}"',
                                'run.device="cpu"'])
    Trainer(config, RunDirectory(path), show_progress=False).run()
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert [(row["fold"], row["epoch"]) for row in rows] == [(fold, epoch) for fold in (0, 1) for epoch in range(4)]
    found = events(path)["validation/sharpe"]
    assert [step for step, _ in found] == list(range(8))
    assert [value for _, value in found] == pytest.approx([row["validation"]["sharpe"] for row in rows], rel=1e-6,
                                                           abs=1e-6)
