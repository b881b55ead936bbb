"""benchmarks/learning.py --json: the file holds every finished run as the benchmark goes, so one stopped part way
(Ctrl-C, a machine's time limit) keeps what it finished, and a complete one lists its runs in the command's order.
(Not test_learning.py: pytest imports test files by basename, and tests/learner/ has one.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.benchmark_scripts import load_script


def fake_run(name: str, seed: int, device: str, overrides: list[str], threads: int) -> dict:
    """A run record shaped as ``run_once`` returns it, without training: the writer is under test, not learning."""
    return {"dataset": name, "seed": seed, "agent": {"sharpe": 0.1 * seed, "round_trips": seed, "turnover": 1.0},
            "buy_and_hold": {"sharpe": 0.0}, "oracle": {"sharpe": 1.0}, "wall_s": 0.0, "overrides": overrides,
            "folds": [{"fold": index, "test": {"round_trips": seed + index + 1},
                       "flat_fold_retries": int(index == 1 and seed % 2 == 1)} for index in range(3)]}


def run_main(module, monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["learning.py", *argv])
    module.main()


def test_a_stopped_benchmark_keeps_the_runs_it_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    learning = load_script("learning")
    calls = []

    def stopped_on_the_third(*job):
        calls.append(job)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return fake_run(*job)

    monkeypatch.setattr(learning, "run_once", stopped_on_the_third)
    out = tmp_path / "runs.json"
    with pytest.raises(KeyboardInterrupt):
        run_main(learning, monkeypatch, ["--datasets", "meanrev", "trend", "--seeds", "2", "--first-seed", "13",
                                         "--json", str(out)])
    document = json.loads(out.read_text())
    assert document["planned_runs"] == 4
    assert [(run["dataset"], run["seed"]) for run in document["runs"]] == [("meanrev", 13), ("meanrev", 14)]
    assert document["args"]["seeds"] == [13, 14]
    assert list(tmp_path.iterdir()) == [out]  # no half-written file left beside it
    # the paired comparison reads a partial file as it reads a whole one
    compare = load_script("learning_compare")
    assert sorted(compare.load_runs([out])) == [("meanrev", 13), ("meanrev", 14)]


def test_a_finished_ablation_lists_every_run_with_its_variant_in_command_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    learning = load_script("learning")
    monkeypatch.setattr(learning, "run_once", fake_run)
    out = tmp_path / "ablation.json"
    run_main(learning, monkeypatch, ["--ablation", "recovery", "--datasets", "meanrev", "--seeds", "2",
                                     "--set", "train.epochs=2", "--json", str(out)])
    document = json.loads(out.read_text())
    variants = list(learning.ABLATIONS["recovery"])
    assert document["planned_runs"] == len(document["runs"]) == 2 * len(variants)
    assert [(run["variant"], run["seed"]) for run in document["runs"]] == [
        (variant, seed) for variant in variants for seed in (0, 1)]
    for run in document["runs"]:  # each variant's own overrides after the command's
        assert run["overrides"] == ["train.epochs=2", *learning.ABLATIONS["recovery"][run["variant"]]]
    printed = capsys.readouterr().out
    assert all(f"| {variant} | meanrev | 2 |" in printed for variant in variants)


def test_each_finished_run_names_the_folds_a_flat_fold_retry_trained_again(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    learning = load_script("learning")
    monkeypatch.setattr(learning, "run_once", fake_run)
    run_main(learning, monkeypatch, ["--datasets", "meanrev", "--seeds", "2", "--first-seed", "4"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("# [")]
    assert len(lines) == 2
    assert "meanrev seed 4:" in lines[0] and "flat-fold retries" not in lines[0]
    assert "meanrev seed 5:" in lines[1] and "5 round trips, flat-fold retries in fold 1," in lines[1]


def test_the_table_counts_test_folds_without_a_round_trip_over_every_seed() -> None:
    learning = load_script("learning")
    trend = [fake_run("trend", seed, "cpu", [], 1) for seed in (13, 14)]
    trend[0]["folds"][0]["test"]["round_trips"] = 0  # seed 13's first fold never closed a position
    trend[1]["folds"][2]["test"]["round_trips"] = 0
    meanrev = [fake_run("meanrev", seed, "cpu", [], 1) for seed in (13, 14)]
    header, _, trend_row, meanrev_row = learning.table_rows(trend + meanrev)
    column = [cell.strip() for cell in header.split("|")].index("folds with no round trip")
    assert [cell.strip() for cell in trend_row.split("|")][column] == "2/6"
    assert [cell.strip() for cell in meanrev_row.split("|")][column] == "0/6"


def write_file(path: Path, runs: list[dict], machine: str = "cpu A") -> Path:
    path.write_text(json.dumps({"args": {"machine": machine}, "planned_runs": len(runs), "runs": runs}))
    return path


def test_table_joins_the_runs_of_several_files_and_trains_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    learning = load_script("learning")
    monkeypatch.setattr(learning, "run_once", lambda *job: pytest.fail(f"--table trained {job}"))
    first = write_file(tmp_path / "a.json", [fake_run("trend", seed, "cuda", [], 1) for seed in (38, 39)])
    second = write_file(tmp_path / "b.json", [fake_run("trend", seed, "cuda", [], 1) for seed in (40, 41, 42)])
    run_main(learning, monkeypatch, ["--table", str(first), str(second)])
    captured = capsys.readouterr()
    header, _, row = captured.out.splitlines()
    assert row.startswith("| trend | 5 | +4.00 [+3.90, +4.10] |")  # the five seeds' Sharpes 3.8 .. 4.2
    assert captured.err == ""  # one machine: nothing to warn about


def test_table_refuses_a_seed_two_files_share_and_warns_across_machines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    learning = load_script("learning")
    first = write_file(tmp_path / "a.json", [fake_run("meanrev", 13, "cpu", [], 1)])
    again = write_file(tmp_path / "b.json", [fake_run("meanrev", seed, "cpu", [], 1) for seed in (14, 13)])
    repeated = r"b\.json: run 1 repeats dataset 'meanrev' seed 13, already read from .*a\.json"
    with pytest.raises(SystemExit, match=repeated):
        run_main(learning, monkeypatch, ["--table", str(first), str(again)])
    other = write_file(tmp_path / "c.json", [fake_run("meanrev", 15, "cuda", [], 1)], machine="gpu B")
    run_main(learning, monkeypatch, ["--table", str(first), str(other)])
    assert "2 machines (cpu A | gpu B)" in capsys.readouterr().err


def test_table_refuses_a_learning_check_file_naming_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    learning = load_script("learning")
    check_run = {key: value for key, value in fake_run("ar1", 1, "cpu", [], 1).items()
                 if key not in ("folds", "buy_and_hold")}  # the shape learning_check.py writes
    path = write_file(tmp_path / "check.json", [check_run])
    with pytest.raises(SystemExit, match=r"check\.json: run 0 has no folds or buy_and_hold: not a run of learning\.py"):
        run_main(learning, monkeypatch, ["--table", str(path)])
