"""The same seed gives the same bytes on the CPU, and a stopped-then-resumed run ends where an uninterrupted one does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_testkit import TINY, TINY_DATA, StopAfter, invoke, read_summary, train_args

from foxhunt.config import load_config
from foxhunt.trainer.resume import RESUME_NAME
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def metric_positions(run_dir: Path) -> list[tuple[int, int]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return [(row["fold"], row["epoch"]) for row in rows]


def validation_metrics(run_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return [row["validation"] for row in rows]


def test_same_seed_gives_byte_identical_summary_and_checkpoints(reference_run: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    result = invoke(*train_args(again))
    assert result.exit_code == 0, result.output
    assert (again / "summary.json").read_bytes() == (reference_run / "summary.json").read_bytes()
    for fold in (0, 1):
        name = f"checkpoints/fold_{fold}/tensors.safetensors"
        assert (again / name).read_bytes() == (reference_run / name).read_bytes()
    assert validation_metrics(again) == validation_metrics(reference_run)


def test_another_seed_gives_another_run(reference_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    result = invoke(*train_args(other), "--seed", "1")
    assert result.exit_code == 0, result.output
    assert read_summary(other)["seed"] == 1
    assert validation_metrics(other) != validation_metrics(reference_run)


def tiny_config():
    return load_config(None, [*TINY, f'data.source="{TINY_DATA}"', 'run.device="cpu"'])


@pytest.mark.parametrize(
    "stop_after",
    [1, 2, 3],
    ids=["inside-the-first-fold", "at-the-fold-boundary", "inside-the-last-fold"],
)
def test_stop_and_resume_in_process_ends_with_the_uninterrupted_summary(
    reference_run: Path, tmp_path: Path, stop_after: int
) -> None:
    path = tmp_path / "run"
    config = tiny_config()
    stopped = Trainer(config, RunDirectory(path), stop=StopAfter(path, stop_after), show_progress=False).run()
    assert stopped is None
    assert (path / "checkpoints" / RESUME_NAME).is_dir()
    assert not (path / "summary.json").exists()
    assert len(metric_positions(path)) == stop_after

    summary = Trainer(config, RunDirectory(path, resume=True), show_progress=False).run(resume_from=path)
    assert summary is not None
    assert (path / "summary.json").read_bytes() == (reference_run / "summary.json").read_bytes()
    assert metric_positions(path) == metric_positions(reference_run)
    assert validation_metrics(path) == validation_metrics(reference_run)
    for fold in (0, 1):
        name = f"checkpoints/fold_{fold}/tensors.safetensors"
        assert (path / name).read_bytes() == (reference_run / name).read_bytes()


def test_resume_refuses_changed_data(tmp_path: Path) -> None:
    path = tmp_path / "run"
    config = tiny_config()
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    (path / "config.toml").write_text(
        (path / "config.toml").read_text(encoding="utf-8").replace("seed=3", "seed=4"), encoding="utf-8"
    )
    result = invoke("train", "--resume", str(path), "--no-progress")
    assert result.exit_code == 2
    assert "data changed" in result.stderr and "Traceback" not in result.output
