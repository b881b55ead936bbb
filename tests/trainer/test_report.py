"""``report.html`` from a run directory's files: what it says, and that nothing in those files can break it.

Each test writes the files a finished run leaves (``summary.json``, ``equity/``, ``metrics.jsonl``) by hand,
so a value can be put anywhere a tampered or unusual file could put it, without training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from foxhunt.trainer.report import build_report

POLICIES = ("agent", "buy_and_hold", "flat")


def metrics(**extra: Any) -> dict[str, Any]:
    return {"net_pnl": 12.5, "sharpe": 0.4, "sortino": 0.6, "max_drawdown": 0.1, "turnover": 2.0, "trades": 3, **extra}


def write_run(run_dir: Path, *, folds: list[dict[str, Any]] | None = None, curves: dict[int, list[float]] | None = None,
              data: str = "synthetic:planted?bars=800&seed=3") -> Path:
    """A finished run's files: ``summary.json`` and each fold's test and validation equity CSV."""
    folds = folds if folds is not None else [
        {"fold": k, "test": {p: metrics() for p in POLICIES}, "validation": {p: metrics() for p in POLICIES}} for k in (0, 1)
    ]
    summary = {"data": data, "seed": 0, "validation_metric": "sharpe", "folds": folds,
               "overall": {p: metrics() for p in POLICIES}, "validation_overall": {p: metrics() for p in POLICIES}}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (run_dir / "equity").mkdir(exist_ok=True)
    for fold, values in (curves or {0: [100.0, 101.0, 99.5, 102.0], 1: [100.0, 100.5, 101.0, 100.0]}).items():
        for name in (f"fold_{fold}.csv", f"fold_{fold}_validation.csv"):
            rows = ["timestamp,agent,buy_and_hold,flat"]
            rows += [f"2020-01-0{i + 1},{v!r},{v!r},100.0" for i, v in enumerate(values)]
            (run_dir / "equity" / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    return run_dir


def test_a_bankrupt_fold_is_named_with_its_bar_above_the_table(tmp_path: Path) -> None:
    ruined = {p: metrics() for p in POLICIES}
    ruined["agent"] = metrics(bankrupt_bar=412)
    folds = [{"fold": 0, "test": ruined, "validation": {p: metrics() for p in POLICIES}}]
    text = build_report(write_run(tmp_path / "run", folds=folds)).read_text(encoding="utf-8")
    test_section = text[text.index("<h2 id='test'>") : text.index("<h2 id='validation'>")]
    assert "<strong>Bankrupt</strong>" in test_section and "fold 0 agent: bankrupt at bar 412" in test_section
    assert "Bankrupt" not in text[text.index("<h2 id='validation'>") :]
