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
            "buy_and_hold": {"sharpe": 0.0}, "oracle": {"sharpe": 1.0}, "wall_s": 0.0, "overrides": overrides}


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
