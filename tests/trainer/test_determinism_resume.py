"""The same seed gives the same bytes on the CPU, and a stopped-then-resumed run ends where an uninterrupted one does."""

from __future__ import annotations

import json
import os
import shutil
import re
from pathlib import Path

import pytest
from trainer_testkit import TINY, TINY_DATA, StopAfter, invoke, read_summary, train_args

from foxhunt.checkpoint import seal_metadata
from foxhunt.config import load_config
from foxhunt.trainer.resume import RESUME_NAME, resume_config
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


def test_resume_refuses_a_changed_config_naming_the_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run"
    config = tiny_config()
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    text = (path / "config.toml").read_text(encoding="utf-8")
    edited = re.sub(r"(?m)^lr = .*$", "lr = 0.001", text.replace("seed=3", "seed=4")
                    .replace("label_smoothing_max = 0.1\n", "label_smoothing_max = 0.2\n"))
    assert "lr = 0.001\n" in edited and "seed=4" in edited and "[plugins.c51]\nlabel_smoothing_max = 0.2\n" in edited
    (path / "config.toml").write_text(edited, encoding="utf-8")
    metrics = (path / "metrics.jsonl").read_bytes()

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Trainer was built for a config that cannot resume")

    monkeypatch.setattr("foxhunt.cli.train_commands.Trainer", no_build)
    result = invoke("train", "--resume", str(path), "--no-progress")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "data.source" in result.stderr and f"learner.lr: {config.learner.lr!r} when trained, 0.001 now" in result.stderr
    assert "plugins.c51.label_smoothing_max: 0.1 when trained, 0.2 now" in result.stderr  # a plugin's own table
    assert "run.seed" not in result.stderr and "learner.lr_min" not in result.stderr  # only the keys that differ
    assert (path / "config.toml").read_text(encoding="utf-8") == edited  # nothing rewritten
    assert (path / "metrics.jsonl").read_bytes() == metrics


def test_a_run_saved_while_the_selection_key_was_enable_still_resumes(tmp_path: Path) -> None:
    # Runs wrote `[plugins] enable = []` (config.toml and the checkpoint's config) before the key became `only`.
    path = tmp_path / "run"
    assert Trainer(tiny_config(), RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    text = (path / "config.toml").read_text(encoding="utf-8")
    assert "only = []\n" in text
    (path / "config.toml").write_text(text.replace("only = []\n", "enable = []\n"), encoding="utf-8")
    metadata_path = path / "checkpoints" / RESUME_NAME / "metadata.json"
    metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
    metadata["config"]["plugins"]["enable"] = metadata["config"]["plugins"].pop("only")
    seal_metadata(metadata, metadata["integrity"]["tensors_sha256"])
    metadata_path.write_text(json.dumps(metadata), encoding="utf-8")
    assert resume_config(path) == tiny_config()  # no "differs from the one this run was trained with"


def write_csv(market, path: Path) -> Path:
    rows = ["time,open,high,low,close,volume"]
    rows += [",".join([str(stamp)[:10], *(repr(float(v)) for v in bar)]) for stamp, bar in zip(market.timestamps, market.ohlcv)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_resume_refuses_changed_data(tmp_path: Path) -> None:
    from foxhunt.data import load

    csv = write_csv(load(TINY_DATA), tmp_path / "bars.csv")
    path = tmp_path / "run"
    config = load_config(None, [*TINY, f'data.source="{csv}"', 'run.device="cpu"'])
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    lines = csv.read_text(encoding="utf-8").splitlines()
    fields = lines[-1].split(",")
    fields[5] = repr(float(fields[5]) + 1.0)  # the last bar's volume: the same file name, other data
    csv.write_text("\n".join([*lines[:-1], ",".join(fields)]) + "\n", encoding="utf-8")
    result = invoke("train", "--resume", str(path), "--no-progress")
    assert result.exit_code == 2
    assert "data changed" in result.stderr and "Traceback" not in result.output


# -- what a kill can leave at an epoch boundary, each resumed to the uninterrupted result -------------------------


def lose_fold_checkpoint(run: Path) -> None:
    """Killed after the resume checkpoint, before the epoch's best policy was written: restore writes it again."""
    shutil.rmtree(run / "checkpoints" / "fold_0")


def between_the_renames(run: Path) -> None:
    """Killed while publishing a resume checkpoint: the previous one moved aside, the new one not yet renamed."""
    checkpoints = run / "checkpoints"
    os.rename(checkpoints / RESUME_NAME, checkpoints / f".{RESUME_NAME}.old")
    (checkpoints / f".{RESUME_NAME}.new-dead").mkdir()
    (checkpoints / f".{RESUME_NAME}.new-dead" / "tensors.safetensors").write_bytes(b"\x00" * 100)


def torn_metric_line(run: Path) -> None:
    with open(run / "metrics.jsonl", "ab") as handle:
        handle.write(b'{"actions": {"DIRECTION": {"FLAT": 3.0')


def line_past_the_checkpoint(run: Path) -> None:
    """Killed after the next epoch's metric line, before its resume checkpoint."""
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    with open(run / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write(lines[-1].replace('"epoch": 0', '"epoch": 1'))


@pytest.fixture(scope="module")
def stopped_after_one_epoch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stopped") / "run"
    assert Trainer(tiny_config(), RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    return path


@pytest.mark.parametrize("damage", [lose_fold_checkpoint, between_the_renames, torn_metric_line, line_past_the_checkpoint])
def test_each_state_a_kill_leaves_resumes_to_the_uninterrupted_result(
    reference_run: Path, stopped_after_one_epoch: Path, tmp_path: Path, damage
) -> None:
    path = tmp_path / "run"
    shutil.copytree(stopped_after_one_epoch, path)
    damage(path)
    result = invoke("train", "--resume", str(path), "--no-progress")
    assert result.exit_code == 0, result.output + result.stderr
    assert (path / "summary.json").read_bytes() == (reference_run / "summary.json").read_bytes()
    assert metric_positions(path) == metric_positions(reference_run)
    for fold in (0, 1):
        name = f"checkpoints/fold_{fold}/tensors.safetensors"
        assert (path / name).read_bytes() == (reference_run / name).read_bytes()
    assert sorted(p.name for p in (path / "checkpoints").iterdir()) == ["fold_0", "fold_1"]  # resume/ removed at the end
