"""benchmarks/validation_gate.py and the per-fold records benchmarks/learning.py writes for it: the records of a
real quick run chain back to the run's reported figure, Spearman's correlation against its rank definition, a
gate holds exactly the folds below its threshold flat, and the script prints both tables (and refuses a file
without fold records, naming it)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.benchmark_scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "validation_gate.py"
BARS_PER_YEAR = 8766.0


def gate_module():
    return load_script("validation_gate")


@pytest.fixture(scope="module")
def quick_run() -> dict:
    learning = load_script("learning")
    return learning.run_once("meanrev", 3, "cpu", [*learning.QUICK_OVERRIDES, "folds.n_folds=2"], 1)


def test_fold_records_chain_back_to_the_runs_reported_figures(quick_run: dict) -> None:
    from foxhunt.folds import FoldConfig
    from foxhunt.trainer.evaluation import combine

    folds = quick_run["folds"]
    assert [fold["fold"] for fold in folds] == [0, 1]
    for fold, (start, stop) in zip(folds, quick_run["windows"], strict=True):
        assert len(fold["test_equity"]) == stop - start
        assert len(fold["validation_sharpes"]) == 1  # the quick run's one epoch
        assert fold["selected_validation_sharpe"] == pytest.approx(fold["validation_sharpes"][0])
        assert fold["flat_fold_retries"] == 0  # train.flat_fold_retries is off: one epoch, never trained again
        assert fold["validation_bars"] == FoldConfig().validation_bars  # the quick run keeps the default
    chained = combine([np.asarray(fold["test_equity"]) for fold in folds], [fold["test"]["fills"] for fold in folds],
                      [fold["test"]["round_trips"] for fold in folds], [fold["test"]["turnover"] for fold in folds],
                      quick_run["bars_per_year"])
    assert chained["sharpe"] == pytest.approx(quick_run["agent"]["sharpe"], rel=1e-9, abs=1e-12)
    assert chained["round_trips"] == quick_run["agent"]["round_trips"]
    assert chained["net_pnl"] == pytest.approx(quick_run["agent"]["net_pnl"], rel=1e-9)


def _reference_spearman(x: list[float], y: list[float]) -> float:
    def ranks(values: list[float]) -> list[float]:
        return [1 + sum(w < v for w in values) + (sum(w == v for w in values) - 1) / 2 for v in values]

    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))


@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), min_size=3, max_size=30))
def test_spearman_is_the_correlation_of_average_ranks(pairs: list[tuple[int, int]]) -> None:
    x, y = [float(a) for a, _ in pairs], [float(b) for _, b in pairs]
    result = gate_module().spearman(x, y)
    if len(set(x)) == 1 or len(set(y)) == 1:
        assert math.isnan(result)
    else:
        assert result == pytest.approx(_reference_spearman(x, y), abs=1e-12)


def _fold(index: int, validation_sharpe: float, rng: np.random.Generator, bars: int = 50) -> dict:
    equity = 1e5 * np.cumprod(np.concatenate([[1.0], 1.0 + rng.normal(0, 1e-3, bars - 1)]))
    return {"fold": index, "validation_bars": bars, "validation_sharpes": [validation_sharpe - 1.0, validation_sharpe],
            "selected_validation_sharpe": validation_sharpe,
            "test": {"sharpe": 0.0, "fills": 10 + index, "round_trips": 5 + index, "turnover": 3.0 + index},
            "test_equity": equity.tolist()}


def _run(dataset: str, seed: int, validation_sharpes: list[float], oracle: float | None) -> dict:
    rng = np.random.default_rng(seed)
    return {"dataset": dataset, "seed": seed, "bars_per_year": BARS_PER_YEAR,
            "oracle": None if oracle is None else {"sharpe": oracle},
            "folds": [_fold(i, v, rng) for i, v in enumerate(validation_sharpes)]}


def test_a_gate_holds_exactly_the_folds_below_it_flat() -> None:
    from foxhunt.env.backtest import equity_ratios

    gate = gate_module()
    run = _run("meanrev", 0, [2.5, -1.0, 0.5], oracle=4.0)
    result = gate.gated(run, 1.0)
    assert result["traded"] == 1
    assert result["agent"]["round_trips"] == 5 and result["agent"]["fills"] == 10
    # the chain by hand: fold 0's returns, then two windows of zero returns
    first = np.asarray(run["folds"][0]["test_equity"])
    returns = np.concatenate([first[1:] / first[:-1] - 1.0, np.zeros(2 * (len(first) - 1))])
    expected = equity_ratios(np.cumprod(np.concatenate([[1.0], 1.0 + returns])), BARS_PER_YEAR)[0]
    assert result["agent"]["sharpe"] == pytest.approx(expected, rel=1e-12)
    assert gate.gated(run, None)["traded"] == 3
    nothing = gate.gated(run, 10.0)
    assert nothing["traded"] == 0 and nothing["agent"]["round_trips"] == 0 and nothing["agent"]["sharpe"] == 0.0


def test_the_script_prints_the_evidence_and_one_row_per_threshold(tmp_path: Path) -> None:
    runs = [_run("meanrev", seed, [2.5, -1.0, 0.5], oracle=4.0) for seed in range(3)]
    runs += [_run("randomwalk", seed, [3.5, 0.2, 1.5], oracle=0.0) for seed in range(3)]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"args": {}, "runs": runs}))
    out = subprocess.run([sys.executable, str(SCRIPT), str(path), "--thresholds", "1", "3"],
                         capture_output=True, text=True, check=True).stdout
    assert "| meanrev | 9 |" in out and "| randomwalk | 9 |" in out
    assert f"| {math.sqrt(BARS_PER_YEAR / 50):.1f} |" in out
    # the random walk's flat oracle: judged on round trips; a gate at 3 keeps fold 0 of each seed (5 round trips)
    assert "| randomwalk | validation Sharpe >= 3 | 3/9 | round trips 5 [5, 5] | 3/0 |" in out
    assert "| meanrev | validation Sharpe >= 1 | 3/9 | agent/oracle" in out
    assert "| meanrev | none | 9/9 |" in out


def test_a_file_without_fold_records_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"args": {}, "runs": [{"dataset": "trend", "seed": 4, "agent": {"sharpe": 1.0}}]}))
    result = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True)
    assert result.returncode != 0
    assert str(path) in result.stderr and "trend seed 4" in result.stderr and "per-fold" in result.stderr
