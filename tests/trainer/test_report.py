"""``report.html`` from a run directory's files: what it says, and that nothing in those files can break it.

Each test writes the files a finished run leaves (``summary.json``, ``equity/``, ``metrics.jsonl``) by hand,
so a value can be put anywhere a tampered or unusual file could put it, without training.
"""

from __future__ import annotations

import base64
import errno
import io
import json
import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from trainer_testkit import invoke

from foxhunt import durable
from foxhunt.errors import FoxhuntError
from foxhunt.trainer.report import build_report

POLICIES = ("agent", "buy_and_hold", "flat")


def metrics(**extra: Any) -> dict[str, Any]:
    return {"net_pnl": 12.5, "sharpe": 0.4, "sortino": 0.6, "max_drawdown": 0.1, "turnover": 481.0, "fills": 950,
            "round_trips": 0, **extra}


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


# -- the page as a person reads it: pictures, their captions, the fold table -----------------------------------

# Every tag the report writes; anything else on the page came from a run file unescaped.
REPORT_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "strong", "table", "tr", "th",
               "td", "figure", "img", "figcaption", "br", "code"}
SLOT_DOCS = {"epsilon.branch": "exploration rate per action branch [Branch]",
             "health.count": "updates observed this fold", "health.value": "learning health in [0, 1]"}


class Page(HTMLParser):
    """The report's tags, its figures (class, alt, PNG bytes, caption), its tables (class, cell texts by row) and
    the text of the paragraph right after each table ("" when none follows)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.figures: list[dict[str, Any]] = []
        self.tables: list[dict[str, Any]] = []
        self.after_table: list[str] = []
        self._into: list[str] | None = None  # where text goes now: a caption, a cell or a paragraph
        self._table_closed = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append(tag)
        if tag == "figure":
            self.figures.append({"class": attributes.get("class"), "caption": []})
        elif tag == "img":
            source = attributes["src"] or ""
            assert source.startswith("data:image/png;base64,") and self.tags[-2] == "figure"
            self.figures[-1]["alt"] = attributes.get("alt")
            self.figures[-1]["png"] = base64.b64decode(source.removeprefix("data:image/png;base64,"), validate=True)
        elif tag == "figcaption":
            self._into = self.figures[-1]["caption"]
        elif tag == "table":
            self.tables.append({"class": attributes.get("class"), "rows": []})
            self.after_table.append("")
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._into = []
            self.tables[-1]["rows"][-1].append(self._into)
        elif tag == "p" and self._table_closed:
            self._into = []
            self.after_table[-1] = self._into
        self._table_closed = False

    def handle_endtag(self, tag: str) -> None:
        if tag in ("figcaption", "td", "th", "p"):
            self._into = None
        if tag == "table":
            self.tables[-1]["rows"] = [["".join(cell) for cell in row] for row in self.tables[-1]["rows"]]
            self._table_closed = True
        if tag == "p" and self.after_table and isinstance(self.after_table[-1], list):
            self.after_table[-1] = "".join(self.after_table[-1])

    def handle_data(self, data: str) -> None:
        if self._into is not None:
            self._into.append(data)


def training_rows() -> list[dict[str, Any]]:
    """Two folds of three epochs of ``metrics.jsonl``: a counter in the hundreds beside values near 0 and 1."""
    found = []
    for fold in range(2):
        for epoch in range(3):
            step = epoch + 1
            found.append({
                "fold": fold, "epoch": epoch, "losses": {"c51": 2.0 / step, "mse": 0.5 / step},
                "grad_norms": {"c51": 0.03 * step, "combined": 0.2 / step}, "budgets": {"c51": 0.6, "mse": 0.4},
                "adaptive": {"health.count": 400.0 * step, "health.value": 0.5 + 0.05 * step,
                             "epsilon.branch": [0.6 / step, 0.5 / step, 0.55 / step, 0.62 / step],
                             "epsilon.fold_start": 96.0 * fold, "gamma.branch": [0.99, 0.98, 0.97, 0.96 + 0.001 * epoch],
                             "cql.alpha": 1.0, "tau.value": 0.005 * step},
                "actions": {"DIRECTION": {"SHORT": 3, "FLAT": 5, "LONG": 4, "HOLD": 2}},
            })
    return found


def write_training(run: Path, rows: list[dict[str, Any]], docs: dict[str, str]) -> Path:
    """``metrics.jsonl`` and a fold checkpoint's metadata recording the slots' declared meanings."""
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (run / "checkpoints" / "fold_0").mkdir(parents=True)
    slots = [{"name": name, "width": 1, "owner": "x", "init": 0.0, "doc": doc} for name, doc in docs.items()]
    (run / "checkpoints" / "fold_0" / "metadata.json").write_text(json.dumps({"isv": {"slots": slots}}), encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def trained_page(tmp_path_factory: pytest.TempPathFactory) -> Page:
    run = write_training(write_run(tmp_path_factory.mktemp("report") / "run"), training_rows(), SLOT_DOCS)
    return Page(build_report(run).read_text(encoding="utf-8"))


def test_every_picture_is_a_png_of_more_than_one_colour_in_a_figure_with_alt_text(trained_page: Page) -> None:
    assert set(trained_page.tags) <= REPORT_TAGS
    assert trained_page.tags.count("img") == len(trained_page.figures) == 2 * 2 + 2 + 5 + 1
    for figure in trained_page.figures:
        image = Image.open(io.BytesIO(figure["png"]))
        image.load()  # decodes the whole image: a truncated or corrupt PNG raises here
        assert image.format == "PNG" and min(image.size) > 100, figure["alt"]
        extrema = image.convert("RGB").getextrema()  # (lowest, highest) per colour band
        assert any(low < high for low, high in extrema), figure["alt"]  # more than one colour: not a blank canvas
        assert figure["alt"]


def test_adaptive_values_are_one_figure_per_slot_group_and_counters_a_table(trained_page: Page) -> None:
    adaptive = {figure["alt"]: "".join(figure["caption"]) for figure in trained_page.figures if figure["class"] == "adaptive"}
    assert set(adaptive) == {f"adaptive values of {group}.*" for group in ("cql", "epsilon", "gamma", "health", "tau")}
    # Each caption names the group's panels and, in brackets, the legend of each; then what the slots mean
    assert "epsilon.branch (direction, magnitude, order_type, urgency)" in adaptive["adaptive values of epsilon.*"]
    assert "health.value (health.value)" in adaptive["adaptive values of health.*"]
    assert "health.value: learning health in [0, 1]" in adaptive["adaptive values of health.*"]
    assert not any("health.count" in caption or "fold_start" in caption for caption in adaptive.values())
    (counters,) = [table for table in trained_page.tables if table["class"] == "counters"]
    assert counters["rows"] == [["slot", "fold 0", "fold 1", "meaning"],
                                ["epsilon.fold_start", "0", "96", ""],
                                ["health.count", "1200", "1200", "updates observed this fold"]]
    series = [figure["alt"] for figure in trained_page.figures if figure["class"] == "series"]
    assert series == ["gradient norms", "loss per component"]


def test_the_fold_table_counts_fills_and_round_trips_beside_their_definition(trained_page: Page) -> None:
    for window in ("test", "validation"):
        index = next(i for i, table in enumerate(trained_page.tables) if table["class"] == window)
        header, first, *_ = trained_page.tables[index]["rows"]
        assert header[-3:] == ["turnover", "fills", "round trips"]
        assert first[:2] == ["0", "agent"] and first[-3:] == ["481", "950", "0"]  # 481x turnover is 950 fills
        definition = trained_page.after_table[index]
        assert definition.startswith("fills: bars on which an order filled")
        assert "round trips: positions closed back to flat or reversed" in definition


def test_a_summary_written_when_round_trips_were_trades_still_reads(tmp_path: Path) -> None:
    old = {"net_pnl": 1.0, "sharpe": 0.1, "sortino": 0.1, "max_drawdown": 0.1, "turnover": 2.0, "trades": 7}
    folds = [{"fold": 0, "test": {p: old for p in POLICIES}, "validation": {p: old for p in POLICIES}}]
    page = Page(build_report(write_run(tmp_path / "run", folds=folds)).read_text(encoding="utf-8"))
    (test,) = [table for table in page.tables if table["class"] == "test"]
    assert test["rows"][1][-3:] == ["2", "n/a", "7"]  # round trips from "trades"; fills were not counted then


def test_slot_names_docs_and_folds_from_the_run_arrive_escaped(tmp_path: Path) -> None:
    rows = [{"fold": SCRIPT if index < 2 else 1, "epoch": index,
             "adaptive": {SCRIPT: float(index), f"{SCRIPT}.value": 0.5 * index, "tau.value": 0.01}}
            for index in range(4)]
    run = write_training(write_run(tmp_path / "run"), rows, {SCRIPT: SCRIPT, "tau.value": '"><img src=x onerror=1>'})
    text = build_report(run).read_text(encoding="utf-8")
    page = Page(text)
    assert set(page.tags) <= REPORT_TAGS and "<script" not in text.lower() and "<img src=x" not in text
    (counters,) = [table for table in page.tables if table["class"] == "counters"]
    assert counters["rows"][0][1] == f"fold {SCRIPT}" and counters["rows"][1] == [SCRIPT, "1", "3", SCRIPT]
    captions = ["".join(figure["caption"]) for figure in page.figures if figure["class"] == "adaptive"]
    assert any('tau.value: "><img src=x onerror=1>' in caption for caption in captions)
