"""``report.html``: what a run did, as pictures that open in a browser with no network.

Built only from the run directory's files (``summary.json``, ``metrics.jsonl``,
``equity/fold_K.csv`` and ``equity/fold_K_validation.csv``), so ``foxhunt
report RUN_DIR`` can rebuild it at any time. Test figures (out of sample) come
first; validation figures (the window each fold's epoch was chosen on) follow
under their own heading, so the two are never read as one. Plots are matplotlib
PNGs embedded as base64 data URIs: one self-contained file, no scripts, no
external assets.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from foxhunt.errors import FoxhuntError
from foxhunt.trainer.run_dir import equity_file_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["build_report", "read_metrics", "read_equity"]

METRIC_COLUMNS = ("net_pnl", "sharpe", "sortino", "max_drawdown", "turnover", "trades")
POLICIES = ("agent", "buy_and_hold", "flat")
# Per window: the summary key of its all-fold figures, the section heading, and what its equity plot is called.
WINDOW_SECTIONS = {
    "test": ("overall", "Test results: out of sample (each fold's chosen policy, backtested once on its test window)",
             "test equity (out of sample)"),
    "validation": ("validation_overall",
                   "Validation results: the selection window (the best epoch was chosen here, so these are optimistic)",
                   "validation equity (selection window)"),
}


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise FoxhuntError(f"{path}:{line_number}: not valid JSON ({error}); the metrics file is damaged") from None
    return rows


def read_equity(path: Path) -> dict[str, np.ndarray]:
    """Columns of one ``equity/fold_K.csv`` as float arrays (timestamps kept as strings)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    columns: dict[str, Any] = {}
    for name in rows[0].keys() if rows else ():
        values = [row[name] for row in rows]
        columns[name] = np.array(values) if name == "timestamp" else np.array(values, dtype=np.float64)
    return columns


def _subplots(*grid: int, figsize: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes, drawn headless.

    matplotlib (about half a second of imports) loads only when a report is drawn,
    so the other commands start without it, and only through ``Figure``: no pyplot
    and no backend switch in the process that builds the report (its PNG canvas is Agg).
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize)
    return figure, figure.subplots(*grid, **kwargs)


def _figure_to_img(figure: Figure, alt: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def _equity_plot(fold: int, curves: dict[str, np.ndarray], title: str, window: str) -> str:
    figure, (top, bottom) = _subplots(2, 1, figsize=(9, 5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    x = np.arange(len(curves["agent"]))
    for name, style in (("agent", "-"), ("buy_and_hold", "--"), ("flat", ":")):
        if name in curves:
            top.plot(x, curves[name], style, label=name.replace("_", " "))
            peak = np.maximum.accumulate(curves[name])
            bottom.plot(x, curves[name] - peak, style, label=name.replace("_", " "))
    top.set_title(f"fold {fold}: {title}")
    top.set_ylabel("equity")
    top.legend(loc="best")
    bottom.set_ylabel("drawdown")
    bottom.set_xlabel(f"{window} bar")
    return _figure_to_img(figure, f"{window} equity and drawdown, fold {fold}")


def _series_plot(title: str, series: dict[str, list[float]], ylabel: str, log: bool = False) -> str:
    figure, axis = _subplots(figsize=(9, 3.5))
    for name, values in sorted(series.items()):
        axis.plot(np.arange(len(values)), values, label=name)
    axis.set_title(title)
    axis.set_xlabel("epoch (all folds, in order)")
    axis.set_ylabel(ylabel)
    if log:
        axis.set_yscale("symlog", linthresh=1e-3)
    if len(series) <= 12:
        axis.legend(loc="best", fontsize=7)
    return _figure_to_img(figure, title)


def _actions_plot(actions: dict[str, list[float]]) -> str:
    figure, axes = _subplots(1, len(actions), figsize=(3 * max(len(actions), 1), 3))
    axes = np.atleast_1d(axes)
    for axis, (branch, counts) in zip(axes, sorted(actions.items())):
        labels = list(counts.keys()) if isinstance(counts, dict) else [str(i) for i in range(len(counts))]
        values = list(counts.values()) if isinstance(counts, dict) else list(counts)
        total = sum(values) or 1.0
        axis.bar(labels, [v / total for v in values])
        axis.set_title(branch.lower())
        axis.tick_params(axis="x", labelrotation=45, labelsize=7)
    axes[0].set_ylabel("share of actions")
    return _figure_to_img(figure, "action distribution per branch")


def _collect_series(metrics: list[dict[str, Any]], key: str) -> dict[str, list[float]]:
    series: dict[str, list[float]] = defaultdict(list)
    for row in metrics:
        for name, value in (row.get(key) or {}).items():
            if isinstance(value, list):
                for index, item in enumerate(value):
                    series[f"{name}[{index}]"].append(float(item))
            elif isinstance(value, (int, float)):
                series[name].append(float(value))
    return dict(series)


def _summary_table(summary: dict[str, Any], window: str) -> str:
    """Per fold and all-fold figures of every policy on ``window`` ("test" or "validation")."""
    header = "".join(f"<th>{html.escape(c)}</th>" for c in ("fold", "policy", *METRIC_COLUMNS))
    rows = []
    for fold in summary.get("folds", []):
        for policy in POLICIES:
            metrics = fold.get(window, {}).get(policy, {})
            cells = "".join(f"<td>{metrics.get(c, float('nan')):.4g}</td>" for c in METRIC_COLUMNS)
            rows.append(f"<tr><td>{fold.get('fold')}</td><td>{policy}</td>{cells}</tr>")
    overall = summary.get(WINDOW_SECTIONS[window][0], {})
    for policy in POLICIES:
        metrics = overall.get(policy, {})
        if metrics:
            cells = "".join(f"<td>{metrics.get(c, float('nan')):.4g}</td>" for c in METRIC_COLUMNS)
            rows.append(f"<tr class='overall'><td>all</td><td>{policy}</td>{cells}</tr>")
    return f"<table class='{window}'><tr>{header}</tr>{''.join(rows)}</table>"


def _bankruptcies(summary: dict[str, Any], window: str) -> list[str]:
    """A notice naming every fold and policy whose account went bankrupt on ``window``, and the bar."""
    ruined = [
        f"fold {html.escape(str(fold.get('fold')))} {policy.replace('_', ' ')}: bankrupt at bar "
        f"{html.escape(str(metrics['bankrupt_bar']))}"
        for fold in summary.get("folds", [])
        for policy in POLICIES
        if "bankrupt_bar" in (metrics := fold.get(window, {}).get(policy, {}))
    ]
    if not ruined:
        return []
    return [f"<p class='bankrupt'><strong>Bankrupt</strong> (equity at or below zero; the backtest traded no more "
            f"after that bar and its figures include the ruin): {'; '.join(ruined)}</p>"]


def _window_section(run_dir: Path, summary: dict[str, Any], window: str) -> list[str]:
    """The heading, table and per-fold equity plots of one window."""
    _, heading, plot_title = WINDOW_SECTIONS[window]
    parts = [f"<h2 id='{window}'>{html.escape(heading)}</h2>", *_bankruptcies(summary, window), _summary_table(summary, window)]
    for fold in summary.get("folds", []):
        path = run_dir / "equity" / equity_file_name(int(fold["fold"]), window)
        if path.exists():
            parts.append(_equity_plot(int(fold["fold"]), read_equity(path), plot_title, window))
    return parts


def build_report(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` from the run's files; returns its path."""
    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    if not summary_path.exists():
        raise FoxhuntError(f"{run_dir}: no summary.json — is this a finished foxhunt run directory?")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    if "validation_overall" not in summary:
        raise FoxhuntError(
            f"{summary_path} was written before folds had a test window: its figures are the best epoch on the "
            "window they are reported on, not out of sample. Train the run again to get a report"
        )
    metrics = read_metrics(run_dir)
    sections = [*_window_section(run_dir, summary, "test"), *_window_section(run_dir, summary, "validation")]
    budgets = (metrics[-1].get("budgets") if metrics else None) or {}
    if budgets:
        cells = "".join(f"<tr><td>{html.escape(name)}</td><td>{share:.3f}</td></tr>" for name, share in sorted(budgets.items()))
        sections.append(f"<h2>Loss components and their gradient budgets</h2><table><tr><th>component</th><th>budget</th></tr>{cells}</table>")
    grad = _collect_series(metrics, "grad_norms")
    if grad:
        sections.append("<h2>Gradient norms per loss component (pre-clip)</h2>")
        sections.append(_series_plot("gradient norms", grad, "L2 norm", log=True))
    adaptive = _collect_series(metrics, "adaptive")
    if adaptive:
        sections.append("<h2>Adaptive ISV values</h2>")
        sections.append(_series_plot("adaptive values over training", adaptive, "value"))
    losses = _collect_series(metrics, "losses")
    if losses:
        sections.append("<h2>Losses per component</h2>")
        sections.append(_series_plot("loss per component", losses, "loss", log=True))
    actions = (metrics[-1].get("actions") if metrics else None) or {}
    if actions:
        sections.append("<h2>Action distribution per branch (last epoch)</h2>")
        sections.append(_actions_plot(actions))
    title = html.escape(f"foxhunt run {run_dir.name}")
    document = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 1000px; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
tr.overall {{ font-weight: bold; }}
img {{ display: block; margin: 1em 0; max-width: 100%; }}
</style></head>
<body><h1>{title}</h1>
<p>Dataset: {html.escape(str(summary.get('data', '')))} &middot; seed {html.escape(str(summary.get('seed', '')))}
&middot; best epoch per fold chosen by validation {html.escape(str(summary.get('validation_metric', '')))}</p>
{''.join(sections)}
</body></html>
"""
    out = run_dir / "report.html"
    out.write_text(document, encoding="utf-8")
    return out
