"""What one validation window can tell: does the selected policy's validation Sharpe predict its test Sharpe,
and would trading a fold only when that figure clears a threshold (holding it flat otherwise) have done better?

    python benchmarks/learning.py --first-seed 13 --seeds 5 --datasets meanrev trend ar1-weak randomwalk --json runs.json
    python benchmarks/validation_gate.py runs.json [more.json ...] [--thresholds 0 1 2 3]

Reads the per-fold records ``learning.py --json`` writes. Per dataset it prints the folds' median selected
validation Sharpe and test Sharpe, their Spearman rank correlation across folds, and the standard error of an
annualised Sharpe measured over one validation window, sqrt(bars per year / bars) (the spread of a zero-edge
policy's figure there, before the best of the epochs is picked). Then one row per threshold: the run's test
figure with every fold whose selected validation Sharpe is below it held flat (no trades, equity unchanged),
chained over the folds as ``foxhunt train`` chains them, judged as benchmarks/learning_compare.py judges a run
(agent/oracle, round trips where the oracle stays flat, the agent's Sharpe on the bundled data), with how many
seeds the gate puts ahead of and behind trading every fold, and how many folds still trade.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from foxhunt.trainer.evaluation import combine

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a sibling script, run as a program or loaded by a test
from learning_compare import compare  # noqa: E402
from learning_compare import load_runs as compare_load_runs  # noqa: E402
from learning_compare import measure_of  # noqa: E402

__all__ = ["load_runs", "spearman", "gated", "evidence_rows", "gate_rows", "main"]

DEFAULT_THRESHOLDS = (0.0, 1.0, 2.0, 3.0)


def load_runs(paths: list[Path]) -> list[dict[str, Any]]:
    """Every run of ``paths`` (``learning.py --json`` files, one run per dataset and seed); refuses a run without
    per-fold records, naming it."""
    runs = compare_load_runs(paths)
    for (dataset, seed), run in runs.items():
        if not run.get("folds") or "bars_per_year" not in run:
            names = ", ".join(str(path) for path in paths)
            raise SystemExit(f"{names}: the run of {dataset} seed {seed} has no per-fold records: it was written "
                             "before learning.py recorded them; run it again")
    return list(runs.values())


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation (the Pearson correlation of the ranks); nan when either side is constant."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def gated(run: dict[str, Any], threshold: float | None) -> dict[str, Any]:
    """``run``'s test figures with each fold whose selected validation Sharpe is below ``threshold`` held flat
    (``None``: every fold trades), and how many folds traded."""
    curves, fills, round_trips, turnovers, traded = [], [], [], [], 0
    for fold in run["folds"]:
        equity = np.asarray(fold["test_equity"], dtype=float)
        if threshold is None or fold["selected_validation_sharpe"] >= threshold:
            traded += 1
            curves.append(equity)
            fills.append(fold["test"]["fills"])
            round_trips.append(fold["test"]["round_trips"])
            turnovers.append(fold["test"]["turnover"])
        else:
            curves.append(np.full_like(equity, equity[0]))
            fills.append(0)
            round_trips.append(0)
            turnovers.append(0.0)
    agent = combine(curves, fills, round_trips, turnovers, run["bars_per_year"])
    return {"dataset": run["dataset"], "seed": run["seed"], "agent": agent, "oracle": run.get("oracle"), "traded": traded}


def _by_dataset(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {name: sorted((run for run in runs if run["dataset"] == name), key=lambda run: run["seed"])
            for name in dict.fromkeys(run["dataset"] for run in runs)}


def evidence_rows(runs: list[dict[str, Any]]) -> list[str]:
    """The markdown table of what validation tells per dataset: the folds' medians, their rank correlation and
    the standard error of a Sharpe read over one validation window."""
    lines = ["| dataset | folds | selected validation Sharpe, median | test Sharpe, median | Spearman (validation, test) "
             "| one validation window's standard error |", "|---|---|---|---|---|---|"]
    for name, rows in _by_dataset(runs).items():
        folds = [fold for run in rows for fold in run["folds"]]
        validation = [fold["selected_validation_sharpe"] for fold in folds]
        test = [fold["test"]["sharpe"] for fold in folds]
        bars = statistics.median(fold["validation_bars"] for fold in folds)
        lines.append(f"| {name} | {len(folds)} | {statistics.median(validation):+.2f} | {statistics.median(test):+.2f} | "
                     f"{spearman(validation, test):+.2f} | {math.sqrt(rows[0]['bars_per_year'] / bars):.1f} |")
    return lines


def gate_rows(runs: list[dict[str, Any]], thresholds: tuple[float, ...]) -> list[str]:
    """The markdown table of the gates: per dataset, one row per threshold (the first: every fold trades), each
    paired seed by seed with every fold trading as benchmarks/learning_compare.py pairs two configs."""
    lines = ["| dataset | gate | folds traded | measure, median [IQR] | seeds ahead/behind |", "|---|---|---|---|---|"]
    for name, rows in _by_dataset(runs).items():
        folds = sum(len(run["folds"]) for run in rows)
        base = {(name, run["seed"]): gated(run, None) for run in rows}
        for threshold in (None, *thresholds):
            results = {(name, run["seed"]): gated(run, threshold) for run in rows}
            [paired] = compare(base, results)
            values = [value for label, value, _ in map(measure_of, results.values()) if label == paired["measure"]]
            q25, q50, q75 = np.percentile(values, [25, 50, 75])
            digits = 0 if paired["measure"] == "round trips" else 2
            lines.append(
                f"| {name} | {'none' if threshold is None else f'validation Sharpe >= {threshold:g}'} | "
                f"{sum(result['traded'] for result in results.values())}/{folds} | {paired['measure']} "
                f"{q50:.{digits}f} [{q25:.{digits}f}, {q75:.{digits}f}] | {paired['ahead']}/{paired['behind']} |"
            )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="learning.py --json files")
    parser.add_argument("--thresholds", nargs="+", type=float, default=list(DEFAULT_THRESHOLDS),
                        help="validation Sharpes (annualised) a fold must reach to trade its test window")
    args = parser.parse_args(argv)
    runs = load_runs(args.files)
    print("\n".join([*evidence_rows(runs), "", *gate_rows(runs, tuple(args.thresholds))]))


if __name__ == "__main__":
    main()
