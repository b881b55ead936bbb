"""Which folders foxhunt writes into: new, empty or its own kind; nothing of anyone else's is changed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from trainer_testkit import invoke

from foxhunt.errors import FoxhuntError
from foxhunt.trainer.run_dir import MARKER_FILE, BacktestDirectory, RunDirectory


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def users_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "config.toml").write_text("# my notes\n[learner]\nlr = 1\n", encoding="utf-8")
    (folder / "checkpoints" / "model.bin").write_bytes(b"\x00\x01")
    return folder


CLAIMS = {
    "train": lambda path: RunDirectory(path),
    "resume": lambda path: RunDirectory(path, resume=True),
    "backtest": lambda path: BacktestDirectory(path).write_json("backtest.json", {}),
}


# (claim, whether the folder has a config.toml); an unmarked folder with a config.toml is, to --resume, a run
# from before the marker (tested below)
@pytest.mark.parametrize(("claim", "with_config"), [("train", True), ("train", False), ("backtest", True),
                                                    ("backtest", False), ("resume", False)])
def test_a_folder_of_someone_elses_files_is_refused_untouched(tmp_path: Path, claim: str, with_config: bool) -> None:
    folder = users_folder(tmp_path)
    if not with_config:
        (folder / "config.toml").unlink()
    before = snapshot(folder)
    with pytest.raises(FoxhuntError, match=r"not a foxhunt .*folder"):
        CLAIMS[claim](folder)
    assert snapshot(folder) == before


def test_an_empty_folder_is_used_and_left_empty_when_the_start_fails(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    run_dir = RunDirectory(folder)
    assert json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))["kind"] == "train"
    run_dir.write_text("config.toml", "x = 1\n")
    run_dir.discard_if_unstarted()
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_a_folder_left_with_only_a_lock_file_is_used(tmp_path: Path) -> None:
    """What a kill between taking the lock and writing the marker leaves: the same command works again."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "foxhunt.lock").write_text('{"pid": 999999999, "host": "%s"}' % socket.gethostname(), encoding="utf-8")
    RunDirectory(tmp_path / "run").release()


def test_a_folder_the_failed_start_created_is_removed(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "new" / "run")
    run_dir.write_text("config.toml", "x = 1\n")
    run_dir.discard_if_unstarted()
    assert not (tmp_path / "new" / "run").exists()


def test_a_folder_holding_an_epoch_is_never_discarded(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.append_metrics({"fold": 0, "epoch": 0})
    run_dir.discard_if_unstarted()
    assert (tmp_path / "run" / "metrics.jsonl").exists()
    run_dir.release()


def test_a_run_that_never_finished_an_epoch_can_be_started_again_in_its_folder(tmp_path: Path) -> None:
    first = RunDirectory(tmp_path / "run")
    first.write_text("config.toml", "x = 1\n")
    first.write_text("plugins.json", "{}\n")
    first.release()
    RunDirectory(tmp_path / "run").release()


def test_a_run_that_holds_epochs_is_only_resumed(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.append_metrics({"fold": 0, "epoch": 0})
    run_dir.release()
    with pytest.raises(FoxhuntError, match=r"already holds a run .* pass --resume"):
        RunDirectory(tmp_path / "run")
    RunDirectory(tmp_path / "run", resume=True).release()


@pytest.mark.parametrize("resume", [False, True], ids=["train", "resume"])
def test_a_finished_run_is_never_resumed_or_rewritten(tmp_path: Path, resume: bool) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.write_json("summary.json", {"overall": {}})
    run_dir.release()
    before = snapshot(tmp_path / "run")
    with pytest.raises(FoxhuntError, match=r"the run finished .*never resumed or rewritten"):
        RunDirectory(tmp_path / "run", resume=resume)
    assert snapshot(tmp_path / "run") == before


def test_backtest_output_never_goes_into_a_training_run_and_a_run_never_into_backtest_output(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.release()
    before = snapshot(tmp_path / "run")
    with pytest.raises(FoxhuntError, match=r"holds a foxhunt training run, not `foxhunt backtest` output"):
        BacktestDirectory(tmp_path / "run")
    assert snapshot(tmp_path / "run") == before

    out = BacktestDirectory(tmp_path / "out")
    assert not (tmp_path / "out").exists()  # created at its first write
    out.write_json("backtest.json", {"a": 1})
    BacktestDirectory(tmp_path / "out").write_json("backtest.json", {"a": 2})  # its own output is rewritten
    assert json.loads((tmp_path / "out" / "backtest.json").read_text(encoding="utf-8")) == {"a": 2}
    with pytest.raises(FoxhuntError, match=r"holds `foxhunt backtest` output, not a foxhunt training run"):
        RunDirectory(tmp_path / "out")


def test_resume_finishes_an_interrupted_checkpoint_write(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.release()
    checkpoints = tmp_path / "run" / "checkpoints"
    (checkpoints / ".resume.old").mkdir()  # killed between moving the old one aside and renaming the new one
    (checkpoints / ".resume.old" / "metadata.json").write_text("{}", encoding="utf-8")
    (checkpoints / ".resume.new-1234").mkdir()
    with capture_logs() as logs:
        RunDirectory(tmp_path / "run", resume=True).release()
    assert sorted(p.name for p in checkpoints.iterdir()) == ["resume"]
    assert (checkpoints / "resume" / "metadata.json").read_text(encoding="utf-8") == "{}"
    assert any(entry["event"].startswith("checkpoint write interrupted") for entry in logs)


def test_a_run_from_before_the_marker_is_resumed_and_marked(tmp_path: Path) -> None:
    folder = tmp_path / "old-run"
    folder.mkdir()
    (folder / "config.toml").write_text("x = 1\n", encoding="utf-8")
    (folder / "metrics.jsonl").write_text('{"fold": 0}\n', encoding="utf-8")
    RunDirectory(folder, resume=True).release()
    assert json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))["kind"] == "train"


def test_resume_of_a_run_killed_before_its_config_was_written_says_to_start_it_again(tmp_path: Path) -> None:
    RunDirectory(tmp_path / "run").release()  # a kill came before config.toml: the folder holds the marker only
    result = invoke("train", "--resume", str(tmp_path / "run"), "--no-progress")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "no config.toml" in result.stderr and "Run the same `foxhunt train` command again" in result.stderr
    assert not (tmp_path / "run" / "foxhunt.lock").exists()  # the refusal released the lock
