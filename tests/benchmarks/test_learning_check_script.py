"""benchmarks/learning_check.py: the learning-quality test's short runs, one row per seed, in a file that
learning_compare.py pairs. The script runs as a user runs it (its own process, one process per run), on real runs
shortened by overrides (one short epoch, a 200-bar test window)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_scripts import BENCHMARKS, load_script

# A few seconds a run: the check's own config, with the epoch and the test window cut short.
TINY = ["--set", "train.env_steps_per_epoch=640", "--set", "train.updates_per_epoch=20",
        "--set", "train.warmup_env_steps=320", "--set", "folds.test_bars=200"]


def test_seeds_are_one_a_range_or_a_list() -> None:
    script = load_script("learning_check")
    assert script.seed_range("3") == [3]
    assert script.seed_range("11-14") == [11, 12, 13, 14]
    assert script.seed_range("1,4,9") == [1, 4, 9]
    for bad in ("5-2", "a", "1-", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="seeds are N, FIRST-LAST"):
            script.seed_range(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="seed 4 is named twice"):
        script.seed_range("4,7,4")


def test_runs_at_a_time_are_at_least_one() -> None:
    script = load_script("learning_check")
    assert script.positive("3") == 3
    for bad in ("0", "-1", "two"):
        with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
            script.positive(bad)


def run_script(*argv: str) -> str:
    """The script's table (stdout); fails the test with its stderr if it exits non-zero."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "learning_check.py"), *argv], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_random_walk_run_is_measured_against_the_churner_and_pairs_by_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "walk.json"
    printed = run_script("--check", "randomwalk", "--seeds", "2-3", "--jobs", "2", "--json", str(out), *TINY)
    document = json.loads(out.read_text())
    assert document["planned_runs"] == 2 and [run["seed"] for run in document["runs"]] == [2, 3]
    for run in document["runs"]:
        assert run["windows"] == [[1800, 2000]]  # the override's 200-bar test window, at the market's end
        assert run["churner_turnover"] > run["agent"]["turnover"] >= 0.0  # nothing trades more than the churner
        assert run["value"] == pytest.approx(run["agent"]["turnover"] / run["churner_turnover"])
    assert "| seed | agent Sharpe | oracle Sharpe | turnover / churner's | round trips | s |" in printed
    median = sorted(run["value"] for run in document["runs"])
    assert f"randomwalk: median turnover / churner's {(median[0] + median[1]) / 2:.2f} over 2 seeds" in printed
    compare = load_script("learning_compare")
    (row,) = compare.compare(compare.load_runs([out]), compare.load_runs([out]))
    assert row["measure"] == "round trips" and row["equal"] == 2


def test_an_ar1_run_reports_agent_over_the_oracle_on_its_test_window(tmp_path: Path) -> None:
    out = tmp_path / "ar1.json"
    printed = run_script("--check", "ar1", "--seeds", "4", "--json", str(out), *TINY)
    (run,) = json.loads(out.read_text())["runs"]
    assert run["windows"] == [[4200, 4400]]  # --set comes after the check's own 3 000-bar window, so it wins
    assert run["oracle"]["sharpe"] != 0.0
    assert run["value"] == pytest.approx(run["agent"]["sharpe"] / run["oracle"]["sharpe"])
    assert f"| 4 | {run['agent']['sharpe']:+.2f} | {run['oracle']['sharpe']:+.2f} | {run['value']:+.2f} |" \
        in printed
