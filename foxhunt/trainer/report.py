"""``report.html``: what a run did, as pictures that open in a browser with no network.

Built only from the run directory's files (``summary.json``, ``metrics.jsonl``,
``equity/fold_K.csv`` and ``equity/fold_K_validation.csv``), so ``foxhunt
report RUN_DIR`` can rebuild it at any time. Test figures (out of sample) come
first; validation figures (the window each fold's epoch was chosen on) follow
under their own heading, so the two are never read as one. Each fold table is
followed by what its activity counts mean (fills and round trips). Plots are
matplotlib PNGs embedded as base64 data URIs, each in a ``<figure>`` whose
caption names what it shows: one self-contained file, no scripts, no external
assets. What each picture shows (time axes, the adaptive values' small
multiples, the counter rule) is :mod:`foxhunt.trainer.report_figures`.

The run's files are data, not trusted markup: a tampered ``summary.json`` or
``metrics.jsonl`` could hold ``<script>`` anywhere, so every value that reaches
the page, numbers included, goes through :func:`html_text` or :func:`html_number` (a
number where one belongs, otherwise the escaped text of what is there). A file
that is not what a run writes (not JSON, not an object where one belongs, a
non-number in an equity curve) is one paragraph naming it. The report is
written atomically (:func:`foxhunt.durable.write_bytes`): a full disk
leaves the previous ``report.html`` whole.
"""

from __future__ import annotations

import base64
import csv
import html
import json
from pathlib import Path
from typing import Any

import numpy as np

from foxhunt.durable import write_bytes
from foxhunt.errors import FoxhuntError
from foxhunt.trainer import report_figures as pictures
from foxhunt.trainer.report_figures import Plot, is_number
from foxhunt.trainer.run_dir import equity_file_name

__all__ = ["build_report", "read_summary", "read_metrics", "read_equity", "read_slot_docs", "COUNTS_DEFINITION",
           "REPORT_STYLE", "SWEEP_TRIAL_FILE", "html_text", "html_number", "figure_html"]

METRIC_COLUMNS = ("net_pnl", "sharpe", "sortino", "max_drawdown", "turnover", "fills", "round_trips")
# Under every fold table: what the activity columns count (docs/fill-model.md, "Round trips").
COUNTS_DEFINITION = (
    "<strong>fills</strong>: bars on which an order filled (opening, adding to, reducing, closing or reversing a "
    "position). <strong>round trips</strong>: positions closed back to flat or reversed; a position still open at "
    "the window's end is not one, so buy and hold shows 1 fill and 0 round trips. <strong>turnover</strong>: "
    "notional traded (contracts × fill price × multiplier) over the window, divided by the initial cash. "
    "n/a: a fold finished before foxhunt counted fills."
)
POLICIES = ("agent", "buy_and_hold", "flat")
# Per window: the summary key of its all-fold figures, the section heading, and what its equity plot is called.
WINDOW_SECTIONS = {
    "test": ("overall", "Test results: out of sample (each fold's chosen policy, backtested once on its test window)",
             "test equity (out of sample)"),
    "validation": ("validation_overall",
                   "Validation results: the selection window (the best epoch was chosen here, so these are optimistic)",
                   "validation equity (selection window)"),
}


# The pages' one style sheet (the run report and foxhunt sweep's sweep.html).
REPORT_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1000px; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
tr.overall { font-weight: bold; }
p.bankrupt { color: #a00; }
img { display: block; margin: 1em 0 0.3em; max-width: 100%; }
figure { margin: 0 0 1.5em; }
figcaption, p.definitions, td.doc { font-size: 0.85em; color: #444; text-align: left; }
"""
# A trial of `foxhunt sweep` carries this file (foxhunt.sweep.trial); its report then links back to its sweep.
SWEEP_TRIAL_FILE = "sweep_trial.json"


def html_text(value: Any) -> str:
    """Any value as HTML text: escaped, quotes included (it may land in an attribute)."""
    return html.escape(str(value), quote=True)


def html_number(value: Any, spec: str = ".4g") -> str:
    """A number formatted with ``spec``; anything else (a tampered file's string or list) as escaped text."""
    return format(value, spec) if is_number(value) else html_text(value)


def _damaged(path: Path, where: str, value: Any, expected: str) -> FoxhuntError:
    return FoxhuntError(
        f"{path}: {where} is {type(value).__name__} {str(value)[:60]!r}, expected {expected}; the file is damaged or "
        "was edited. Restore it, or train the run again"
    )


def _object(value: Any, path: Path, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _damaged(path, where, value, "a JSON object")
    return value


def read_summary(run_dir: Path) -> dict[str, Any]:
    """``summary.json`` as a dict whose folds and figures are objects; anything else is one paragraph."""
    path = run_dir / "summary.json"
    if not path.exists():
        raise FoxhuntError(f"{run_dir}: no summary.json — is this a finished foxhunt run directory?")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise FoxhuntError(f"{path}: cannot read it as JSON ({error}); the file is damaged. Restore it, or train "
                           "the run again") from None
    summary = _object(summary, path, "the top level")
    folds = summary.get("folds", [])
    if not isinstance(folds, list):
        raise _damaged(path, "'folds'", folds, "a list")
    for index, fold in enumerate(folds):
        fold = _object(fold, path, f"folds[{index}]")
        for window in WINDOW_SECTIONS:
            for policy, figures in _object(fold.get(window, {}), path, f"folds[{index}].{window}").items():
                _object(figures, path, f"folds[{index}].{window}.{policy}")
    for key, _heading, _title in WINDOW_SECTIONS.values():
        for policy, figures in _object(summary.get(key, {}), path, f"'{key}'").items():
            _object(figures, path, f"{key}.{policy}")
    return summary


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise FoxhuntError(f"{path}: cannot read it ({error}); the metrics file is damaged") from None
    for line_number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise FoxhuntError(f"{path}:{line_number}: not valid JSON ({error}); the metrics file is damaged") from None
            rows.append(_object(row, path, f"line {line_number}"))
    return rows


def read_equity(path: Path) -> dict[str, np.ndarray]:
    """Columns of one ``equity/fold_K.csv`` as float arrays (timestamps kept as strings)."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise FoxhuntError(f"{path}: cannot read it as CSV ({error}); the equity file is damaged") from None
    columns: dict[str, Any] = {}
    for name in rows[0].keys() if rows else ():
        if name is None:  # fields beyond the header's: the row check below names the line
            continue
        values = [row[name] for row in rows]
        if name == "timestamp":
            columns[name] = np.array([str(v) for v in values])
            continue
        try:
            columns[name] = np.array(values, dtype=np.float64)
        except (TypeError, ValueError):
            line = next(i for i, v in enumerate(values, start=2) if not _parses_as_float(v))
            raise FoxhuntError(f"{path}: line {line}, column {name!r}: {values[line - 2]!r} is not a number; the "
                               "equity file is damaged") from None
    return columns


def _parses_as_float(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def read_slot_docs(run_dir: Path) -> dict[str, str]:
    """Each ISV slot's declared meaning (its ``doc``), from the layout a fold checkpoint records; {} without one.

    Only captions come from here: a checkpoint that cannot be read leaves the plots without them (``foxhunt
    backtest`` is what names a damaged checkpoint), and every text is escaped where it reaches the page.
    """
    for path in sorted((run_dir / "checkpoints").glob("*/metadata.json")):
        try:
            slots = json.loads(path.read_text(encoding="utf-8"))["isv"]["slots"]
            return {str(slot["name"]): str(slot.get("doc", "")) for slot in slots}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return {}


def figure_html(plot: Plot, kind: str) -> str:
    """``plot`` as a PNG in a ``<figure>``: the alt text, then a caption naming each panel and its legend."""
    encoded = base64.b64encode(pictures.png(pictures.draw(plot))).decode("ascii")
    panels = "; ".join(
        f"{html_text(panel.ylabel)} ({', '.join(html_text(line.label) for line in panel.lines)})" for panel in plot.panels
    )
    notes = "".join(f"<br><code>{html_text(name)}</code>: {html_text(doc)}" for name, doc in plot.notes)
    return (f"<figure class='{html_text(kind)}'><img alt=\"{html_text(plot.alt)}\" src=\"data:image/png;base64,{encoded}\">"
            f"<figcaption>{html_text(plot.title)}: {panels}{notes}</figcaption></figure>")


def _image_html(data: bytes, alt: str, kind: str) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return f"<figure class='{html_text(kind)}'><img alt=\"{html_text(alt)}\" src=\"data:image/png;base64,{encoded}\"></figure>"


def _cell(metrics: dict[str, Any], column: str) -> str:
    if column == "round_trips" and column not in metrics:
        return html_number(metrics.get("trades", float("nan")))  # summary.json written when round trips were "trades"
    if column == "fills" and column not in metrics:
        return "n/a"
    return html_number(metrics.get(column, float("nan")))


def _summary_table(summary: dict[str, Any], window: str) -> str:
    """Per fold and all-fold figures of every policy on ``window`` ("test" or "validation")."""
    header = "".join(f"<th>{html_text(c.replace('_', ' '))}</th>" for c in ("fold", "policy", *METRIC_COLUMNS))
    rows = []
    for fold in summary.get("folds", []):
        for policy in POLICIES:
            metrics = fold.get(window, {}).get(policy, {})
            cells = "".join(f"<td>{_cell(metrics, c)}</td>" for c in METRIC_COLUMNS)
            rows.append(f"<tr><td>{html_text(fold.get('fold'))}</td><td>{html_text(policy)}</td>{cells}</tr>")
    overall = summary.get(WINDOW_SECTIONS[window][0], {})
    for policy in POLICIES:
        metrics = overall.get(policy, {})
        if metrics:
            cells = "".join(f"<td>{_cell(metrics, c)}</td>" for c in METRIC_COLUMNS)
            rows.append(f"<tr class='overall'><td>all</td><td>{html_text(policy)}</td>{cells}</tr>")
    return (f"<table class='{html_text(window)}'><tr>{header}</tr>{''.join(rows)}</table>"
            f"<p class='definitions'>{COUNTS_DEFINITION}</p>")


def _account_notice(summary: dict[str, Any], window: str, key: str, describe: Any, lead: str) -> list[str]:
    """One notice naming every fold and policy whose ``window`` figures hold ``key``, each described by ``describe``."""
    found = [
        f"fold {html_text(fold.get('fold'))} {html_text(policy.replace('_', ' '))}: {describe(metrics)}"
        for fold in summary.get("folds", [])
        for policy in POLICIES
        if key in (metrics := fold.get(window, {}).get(policy, {}))
    ]
    return [f"<p class='bankrupt'>{lead}: {'; '.join(found)}</p>"] if found else []


def _bankruptcies(summary: dict[str, Any], window: str) -> list[str]:
    """Every fold and policy whose account went bankrupt on ``window``, and the bar."""
    return _account_notice(
        summary, window, "bankrupt_bar", lambda metrics: f"bankrupt at bar {html_text(metrics['bankrupt_bar'])}",
        "<strong>Bankrupt</strong> (equity at or below zero; the backtest traded no more after that bar and its "
        "figures include the ruin)",
    )


def _margin_calls(summary: dict[str, Any], window: str) -> list[str]:
    """Every fold and policy whose position the margin cut on ``window``: how often, from which bar."""
    return _account_notice(
        summary, window, "margin_calls",
        lambda metrics: f"{html_text(metrics['margin_calls'])} from bar {html_text(metrics.get('first_margin_call_bar'))}",
        "<strong>Margin calls</strong> (a position larger than the account's margin allowed, cut at the market)",
    )


def _fold_number(value: Any) -> int | None:
    """The fold's index when it is one (it names the equity files); None for anything a tampered file holds."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _window_section(run_dir: Path, summary: dict[str, Any], window: str) -> list[str]:
    """The heading, table and per-fold equity plots of one window."""
    _, heading, plot_title = WINDOW_SECTIONS[window]
    parts = [f"<h2 id='{html_text(window)}'>{html_text(heading)}</h2>", *_bankruptcies(summary, window),
             *_margin_calls(summary, window),
             _summary_table(summary, window)]
    for fold in summary.get("folds", []):
        number = _fold_number(fold.get("fold"))
        path = run_dir / "equity" / equity_file_name(number, window) if number is not None else None
        if path is not None and path.is_file():
            parts.append(figure_html(pictures.equity_plot(number, read_equity(path), plot_title, window), "equity"))
    return parts


def _fault_notice(summary: dict[str, Any]) -> list[str]:
    """The numerical fault that stopped the run (summary.json's ``fault``), first on the page."""
    fault = summary.get("fault")
    if not isinstance(fault, dict):
        return []
    stage = "burn-in epoch" if fault.get("burn_in") else "epoch"  # [train] burn_in_epochs, before the fold's own
    return [f"<p class='bankrupt'><strong>Stopped by a numerical fault</strong> in fold {html_text(fault.get('fold'))}, "
            f"{stage} {html_text(fault.get('epoch'))}: the first NaN or infinity came from {html_text(fault.get('source'))}. "
            "The figures below cover only the folds finished before it.</p>"]


def _band_notice(summary: dict[str, Any]) -> list[str]:
    """The regression band that stopped the run (summary.json's ``bands``, docs/bands.md), first on the page."""
    stop = summary.get("bands")
    if not isinstance(stop, dict):
        return []
    band = stop.get("band")
    low, high = (band[0], band[1]) if isinstance(band, list) and len(band) == 2 else (None, None)
    epochs = stop.get("epochs")
    count = len(epochs) if isinstance(epochs, list) else None
    return [f"<p class='bankrupt'><strong>Stopped by its regression bands</strong> in fold {html_text(stop.get('fold'))}, "
            f"epoch {html_text(stop.get('epoch'))}: {html_text(stop.get('metric'))} = {html_number(stop.get('value'), '.6g')} "
            f"({html_text(stop.get('reason'))}; band {html_number(low, '.10g')} to {html_number(high, '.10g')}, "
            f"{html_text(count)} consecutive epochs, patience {html_text(stop.get('patience'))}; bands file "
            f"{html_text(stop.get('file'))}). The figures below cover only the folds finished before it.</p>"]


def _counters_table(counters: list[pictures.Counter]) -> str:
    """Counter slots' values at each fold's last epoch (the rule: :mod:`foxhunt.trainer.report_figures`)."""
    folds = list(dict.fromkeys(fold for counter in counters for fold, _ in counter.by_fold))
    header = "".join(f"<th>fold {html_text(fold)}</th>" for fold in folds)
    rows = []
    for counter in counters:
        values = dict(counter.by_fold)
        cells = "".join(f"<td>{html_number(values[f], '.0f') if f in values else ''}</td>" for f in folds)
        rows.append(f"<tr><td>{html_text(counter.name)}</td>{cells}<td class='doc'>{html_text(counter.doc)}</td></tr>")
    return ("<h3>Counters</h3><p>Slots that count (whole numbers that never fall within a fold and grow at some "
            "point): not plotted beside the values, here at the end of each fold.</p>"
            f"<table class='counters'><tr><th>slot</th>{header}<th>meaning</th></tr>{''.join(rows)}</table>")


def _training_sections(metrics: list[dict[str, Any]], docs: dict[str, str]) -> list[str]:
    """The per-epoch pictures of ``metrics.jsonl`` (against epochs) and the last epoch's action shares."""
    sections = []
    axis = pictures.EpochAxis.of(metrics)
    grad = pictures.series_plot("gradient norms", metrics, "grad_norms", "L2 norm", axis, log=True)
    if grad is not None:
        sections += ["<h2>Gradient norms per loss component (pre-clip)</h2>", figure_html(grad, "series")]
    plots, counters = pictures.adaptive_plots(metrics, docs, axis)
    if plots or counters:
        sections.append("<h2>Adaptive ISV values</h2><p>One picture per slot group, one panel per slot; under each, "
                        "what its slots mean as their plugins declare it.</p>")
        sections += [figure_html(plot, "adaptive") for plot in plots]
        if counters:
            sections.append(_counters_table(counters))
    losses = pictures.series_plot("loss per component", metrics, "losses", "loss", axis, log=True)
    if losses is not None:
        sections += ["<h2>Losses per component</h2>", figure_html(losses, "series")]
    actions = metrics[-1].get("actions") if metrics else None
    if isinstance(actions, dict) and actions:
        sections.append("<h2>Action distribution per branch (last epoch)</h2>")
        sections.append(_image_html(pictures.actions_png(actions), "action distribution per branch", "actions"))
    return sections


# The columns of the plateau-recovery table: (record key, heading) of each fired `recovery` record of metrics.jsonl
RECOVERY_COLUMNS = (
    ("epoch", "epoch"), ("rewound_to", "rewound to epoch"), ("rewound_rate", "its improvement rate"),
    ("shrink", "shrink λ"), ("noise", "noise σ"), ("epsilon_boost", "ε boost"),
    ("temperature_multiplier", "temperature ×"), ("lr_multiplier", "LR ×"), ("boost_epochs", "boost epochs"),
    ("reset_moments", "Adam moments reset"),
)


def _recovery_section(metrics: list[dict[str, Any]]) -> list[str]:
    """``[train.recovery]``: one row per recovery that fired (none when the run had recovery off)."""
    records = [(row.get("fold"), row["recovery"]) for row in metrics if isinstance(row.get("recovery"), dict)]
    if not records:
        return []
    heading = "<h2 id='recovery'>Plateau recoveries</h2>"
    fired = [(fold, record) for fold, record in records if record.get("fired") is True]
    if not fired:
        return [heading, "<p>Plateau recovery was on; no validation plateau called for one.</p>"]

    def cell(value: Any) -> str:
        if isinstance(value, list):
            return html_text(", ".join(str(item) for item in value) or "none")
        return html_number(value) if value is not None else "n/a"

    header = "<th>fold</th>" + "".join(f"<th>{html_text(title)}</th>" for _, title in RECOVERY_COLUMNS)
    rows = "".join(f"<tr><td>{cell(fold)}</td>" + "".join(f"<td>{cell(record.get(key))}</td>" for key, _ in RECOVERY_COLUMNS)
                   + "</tr>" for fold, record in fired)
    return [heading, "<p>Each row: a plateau of the validation metric, the learner rewound to the ring's checkpoint of "
            "the highest improvement rate, shrunk and perturbed, with raised exploration and learning rate for the "
            "boost epochs (docs/learner.md, \"Plateau recovery\").</p>",
            f"<table class='recovery'><tr>{header}</tr>{rows}</table>"]


def _flat_fold_section(metrics: list[dict[str, Any]]) -> list[str]:
    """``[train] flat_fold_retries``: one row per retry that fired (none when no fold was retried)."""
    fired = [row for row in metrics if isinstance(row.get("flat_fold_retry"), int)]
    if not fired:
        return []
    rows = "".join(f"<tr><td>{html_number(row.get('fold'))}</td><td>{html_number(row.get('epoch'))}</td>"
                   f"<td>{html_number(row['flat_fold_retry'])}</td></tr>" for row in fired)
    return ["<h2 id='flat-fold-retries'>Flat-fold retries</h2>",
            "<p>Each row: the fold's last epoch so far made no trade on its validation window, so the fold trained its "
            "epochs again from the networks it had, after a fold boundary; every epoch stayed selectable "
            "(docs/learner.md, \"Retrying a flat fold\").</p>",
            f"<table class='recovery'><tr><th>fold</th><th>after epoch</th><th>retry</th></tr>{rows}</table>"]


def _sweep_link(run_dir: Path) -> str:
    """For a trial of a sweep: a relative link to the sweep's page, naming the trial's seed and fold; else ''."""
    path = run_dir / SWEEP_TRIAL_FILE
    if not path.is_file():
        return ""
    try:
        record = _object(json.loads(path.read_text(encoding="utf-8")), path, "the top level")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return ""  # the link is a convenience; `foxhunt sweep --retry` rewrites a damaged trial
    label = record.get("label")
    what = f"variant {html_text(label)}, " if label and label != "base" else ""
    return (f"<p class='sweep'>Trial {html_text(record.get('trial', run_dir.name))} of a sweep ({what}seed "
            f"{html_text(record.get('seed'))}, fold {html_text(record.get('fold'))}): "
            "<a href='../sweep.html'>all trials of the sweep</a></p>\n")


def build_report(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` from the run's files, atomically; returns its path."""
    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    if "validation_overall" not in summary:
        raise FoxhuntError(
            f"{run_dir / 'summary.json'} was written before folds had a test window: its figures are the best epoch "
            "on the window they are reported on, not out of sample. Train the run again to get a report"
        )
    metrics = read_metrics(run_dir)
    sections = [*_fault_notice(summary), *_band_notice(summary), *_window_section(run_dir, summary, "test"),
                *_window_section(run_dir, summary, "validation")]
    budgets = metrics[-1].get("budgets") if metrics else None
    if isinstance(budgets, dict) and budgets:
        cells = "".join(f"<tr><td>{html_text(name)}</td><td>{html_number(share, '.3f')}</td></tr>"
                        for name, share in sorted(budgets.items()))
        sections.append(f"<h2>Loss components and their gradient budgets</h2><table><tr><th>component</th><th>budget</th></tr>{cells}</table>")
    sections += _recovery_section(metrics) + _flat_fold_section(metrics)
    sections += _training_sections(metrics, read_slot_docs(run_dir))
    title = html_text(f"foxhunt run {run_dir.name}")
    sweep = _sweep_link(run_dir)
    document = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{REPORT_STYLE}</style></head>
<body><h1>{title}</h1>
{sweep}<p>Dataset: {html_text(summary.get('data', ''))} &middot; seed {html_text(summary.get('seed', ''))}
&middot; best epoch per fold chosen by validation {html_text(summary.get('validation_metric', ''))}</p>
{''.join(sections)}
</body></html>
"""
    out = run_dir / "report.html"
    try:
        return write_bytes(out, document.encode("utf-8"))
    except OSError as error:
        raise FoxhuntError(f"{out}: cannot write the report ({error.strerror or error}); any earlier report.html is "
                           "unchanged. Free some space (or fix the folder's permissions) and run `foxhunt report` "
                           "again") from None
