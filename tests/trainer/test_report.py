"""``report.html`` from a run directory's files: what it says, and that nothing in those files can break it.

Each test writes the files a finished run leaves (``summary.json``, ``equity/``, ``metrics.jsonl``) by hand,
so a value can be put anywhere a tampered or unusual file could put it, without training.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from trainer_testkit import invoke

from foxhunt import durable
from foxhunt.errors import FoxhuntError
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


def test_margin_calls_are_named_with_their_count_and_first_bar(tmp_path: Path) -> None:
    called = {p: metrics() for p in POLICIES}
    called["buy_and_hold"] = metrics(margin_calls=7, first_margin_call_bar=305)
    folds = [{"fold": 1, "test": {p: metrics() for p in POLICIES}, "validation": called}]
    text = build_report(write_run(tmp_path / "run", folds=folds)).read_text(encoding="utf-8")
    validation_section = text[text.index("<h2 id='validation'>") :]
    assert "<strong>Margin calls</strong>" in validation_section
    assert "fold 1 buy and hold: 7 from bar 305" in validation_section
    assert "Margin calls" not in text[text.index("<h2 id='test'>") : text.index("<h2 id='validation'>")]


def test_a_numerical_fault_is_named_first_on_the_page(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", folds=[])
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["fault"] = {"source": "loss component c51: <b>loss value</b>", "fold": 0, "epoch": 3, "message": "m"}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    text = build_report(run).read_text(encoding="utf-8")
    assert "Stopped by a numerical fault</strong> in fold 0, epoch 3" in text
    assert "loss component c51: &lt;b&gt;loss value&lt;/b&gt;" in text
    assert text.index("numerical fault") < text.index("<h2 id='test'>")


SCRIPT = "<script>alert(1)</script>"


def test_a_tampered_summary_cannot_inject_script_anywhere(tmp_path: Path) -> None:
    """<script> in the fold value, the data source, the seed, a metric, a bankrupt bar and the run folder's
    name all arrive escaped: the page holds no tag that came from the files."""
    figures = {p: metrics() for p in POLICIES}
    figures["agent"] = metrics(sharpe=SCRIPT, bankrupt_bar=SCRIPT)
    folds = [{"fold": SCRIPT, "test": figures, "validation": figures}, {"fold": 1, "test": figures, "validation": figures}]
    run = write_run(tmp_path / f"run{SCRIPT.replace('/', '')}", folds=folds, data=f"prices{SCRIPT}.csv")
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["seed"] = SCRIPT
    summary["validation_metric"] = '"><img src=x onerror=alert(1)>'
    summary["overall"]["agent"]["net_pnl"] = SCRIPT
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    rows = [{"budgets": {SCRIPT: 0.5, "c51": SCRIPT}, "losses": {SCRIPT: 1.0}, "actions": {SCRIPT: {SCRIPT: 3, "$\\foo$": 1}}}]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    text = build_report(run).read_text(encoding="utf-8")
    assert "<script" not in text.lower() and "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "fold &lt;script&gt;alert(1)&lt;/script&gt; agent: bankrupt at bar &lt;script&gt;" in text
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in text
    assert 'alt="test equity and drawdown, fold 1"' in text  # the intact fold still gets its plot


def test_damaged_run_files_are_one_paragraph_naming_the_file(tmp_path: Path) -> None:
    cases = {
        "summary.json": ("summary.json", "{not json", "cannot read it as JSON"),
        "a list at the top": ("summary.json", "[1, 2]", "the top level is list"),
        "folds not a list": ("summary.json", json.dumps({"folds": {"0": 1}, "validation_overall": {}}), "'folds' is dict"),
        "a fold not an object": ("summary.json", json.dumps({"folds": [SCRIPT], "validation_overall": {}}), "folds[0] is str"),
        "metrics line": ("metrics.jsonl", "[1]\n", "line 1 is list"),
        "equity value": ("equity/fold_0.csv", "timestamp,agent\n2020-01-01,100\n2020-01-02,lots\n", "line 3, column 'agent'"),
        "not UTF-8": ("summary.json", b"\xff\xfe{}", "cannot read it as JSON"),
    }
    for case, (name, content, fragment) in cases.items():
        run = write_run(tmp_path / case.replace(" ", "_"))
        target = run / name
        target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        with pytest.raises(FoxhuntError) as caught:
            build_report(run)
        assert str(caught.value).startswith(str(target)) and fragment in str(caught.value), case
        result = invoke("report", str(run))
        assert result.exit_code == 2 and "Traceback" not in result.output and fragment in result.stderr, case


def test_report_is_written_atomically_and_a_full_disk_keeps_the_previous_one(tmp_path: Path, monkeypatch) -> None:
    run = write_run(tmp_path / "run")
    first = build_report(run).read_bytes()
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(durable.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    build_report(run)
    assert len(synced) == 2  # the file's content, then the folder holding the rename

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable.os, "fsync", full_disk)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["data"] = "a different source that must not reach the page"
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    with pytest.raises(FoxhuntError, match=r"report\.html: cannot write the report \(No space left on device\); any "
                                           "earlier report.html is unchanged"):
        build_report(run)
    assert (run / "report.html").read_bytes() == first
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []


def test_equity_near_the_float64_limit_is_drawn_in_powers_of_ten(tmp_path: Path) -> None:
    """initial_cash=1e308 crashed matplotlib ("arange: cannot compute length"); the report scales the axis."""
    run = write_run(tmp_path / "run", curves={0: [1e308, 1.5e308, 9e307, 1.7e308], 1: [1e308, float("inf"), 1e308, 1e308]})
    text = build_report(run).read_text(encoding="utf-8")
    assert 'alt="test equity and drawdown, fold 0"' in text and 'alt="validation equity and drawdown, fold 1"' in text
