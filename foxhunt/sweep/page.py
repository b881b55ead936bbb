"""``sweep.html``: the sweep's figures and trials as one self-contained page, in the run report's style.

Built from ``sweep.json``'s data only. Per variant, a table of each test metric:
the agent's mean, std, IQR and bootstrap 95% interval, and the same for agent
minus buy-and-hold and agent minus flat; then one picture of every complete
trial's test Sharpe beside buy-and-hold's; then every trial with its state (the
reason of a failed one) and a relative link to its ``report.html``, so the sweep
folder can be moved or copied as a whole. Every value reaches the page through
the report's escaping helpers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from foxhunt import durable
from foxhunt.sweep.aggregate import METRICS, SERIES
from foxhunt.trainer import report_figures as pictures
from foxhunt.trainer.report import REPORT_STYLE, figure_html, html_number, html_text

__all__ = ["PAGE_FILE", "page_html", "write_page"]

PAGE_FILE = "sweep.html"
SERIES_NAMES = {"agent": "agent", "minus_buy_and_hold": "agent − buy and hold", "minus_flat": "agent − flat"}


def _stats_cells(stats: dict[str, Any]) -> str:
    if not stats.get("n"):
        return "<td>0</td>" + "<td></td>" * 4
    ci = stats.get("ci95") or [None, None]
    std = html_number(stats["std"]) if stats.get("std") is not None else "–"
    return (f"<td>{html_text(stats['n'])}</td><td>{html_number(stats['mean'])}</td><td>{std}</td>"
            f"<td>{html_number(stats['iqr'])}</td><td>[{html_number(ci[0])}, {html_number(ci[1])}]</td>")


def _metrics_table(metrics: dict[str, Any]) -> str:
    header = "<tr><th>metric</th><th>series</th><th>n</th><th>mean</th><th>std</th><th>IQR</th><th>95% CI of the mean</th></tr>"
    rows = []
    for metric in METRICS:
        for series in SERIES:
            stats = metrics.get(metric, {}).get(series, {})
            cls = " class='overall'" if series == "minus_buy_and_hold" else ""
            rows.append(f"<tr{cls}><td>{html_text(metric.replace('_', ' '))}</td>"
                        f"<td>{html_text(SERIES_NAMES[series])}</td>{_stats_cells(stats)}</tr>")
    return f"<table class='metrics'>{header}{''.join(rows)}</table>"


def _sharpe_plot(data: dict[str, Any]) -> str:
    """Each complete trial's test Sharpe (agent and buy-and-hold) at its variant's position, spread sideways."""
    by_variant: dict[int, list[tuple[float, float]]] = {}
    for trial in data["trials"]:
        test = trial.get("test", {})
        agent, hold = test.get("agent", {}).get("sharpe"), test.get("buy_and_hold", {}).get("sharpe")
        if pictures.is_number(agent) and pictures.is_number(hold):
            by_variant.setdefault(trial["variant"], []).append((float(agent), float(hold)))
    if not by_variant:
        return ""
    offsets = np.linspace(-0.2, 0.2, num=max(len(rows) for rows in by_variant.values()))
    x = np.array([variant + offset for variant, rows in by_variant.items() for offset, _ in zip(offsets, rows)])
    agents = np.array([agent for rows in by_variant.values() for agent, _ in rows])
    holds = np.array([hold for rows in by_variant.values() for _, hold in rows])
    plot = pictures.Plot(
        title="test Sharpe of every complete trial", alt="test Sharpe per trial, by variant", xlabel="variant",
        panels=(pictures.Panel("Sharpe (test)", (pictures.Line("agent", x, agents, "o"),
                                                 pictures.Line("buy and hold", x, holds, "x"))),),
        ticks=tuple((float(v["variant"]), f"v{v['variant']}") for v in data["variants"]),
    )
    return figure_html(plot, "sharpe")


def _trials_table(trials: list[dict[str, Any]]) -> str:
    header = "<tr><th>trial</th><th>variant</th><th>seed</th><th>fold</th><th>state</th><th>seconds</th><th>reason</th></tr>"
    rows = []
    for trial in trials:
        name = html_text(trial["name"])
        link = f"<a href='{html_text(trial['report'])}'>{name}</a>" if trial.get("report") else name
        seconds = html_number(trial["seconds"], ".1f") if trial.get("seconds") is not None else ""
        rows.append(f"<tr class='{html_text(trial['state'])}'><td>{link}</td><td>v{html_text(trial['variant'])}</td>"
                    f"<td>{html_text(trial['seed'])}</td><td>{html_text(trial['fold'])}</td>"
                    f"<td>{html_text(trial['state'])}</td><td>{seconds}</td>"
                    f"<td class='doc'>{html_text(trial.get('reason', ''))}</td></tr>")
    return f"<table class='trials'>{header}{''.join(rows)}</table>"


def page_html(data: dict[str, Any]) -> str:
    """The page for ``sweep.json``'s ``data``."""
    counts = data["counts"]
    title = html_text(f"foxhunt sweep {data['sweep']}")
    boot = data["bootstrap"]
    parts = [f"<p>{html_text(counts['complete'])} complete, {html_text(counts['failed'])} failed, "
             f"{html_text(counts['missing'])} missing of {html_text(len(data['trials']))} trials (seeds "
             f"{html_text(data['seeds'])} × folds {html_text(data['folds'])}). Each trial trains and tests one fold; "
             "its figures are its test window's. Statistics are over each variant's complete trials; the interval is "
             f"a percentile bootstrap of the mean ({html_text(boot['resamples'])} resamples, seed "
             f"{html_text(boot['seed'])}).</p>"]
    if counts["failed"] or counts["missing"]:
        parts.append("<p class='bankrupt'>Some trials did not complete: <code>foxhunt sweep --retry "
                     f"{html_text(data['sweep'])}</code> runs them again.</p>")
    for variant in data["variants"]:
        overrides = " ".join(f"--set {o}" for o in variant["overrides"]) or "(the base config)"
        parts.append(f"<h2 id='v{html_text(variant['variant'])}'>v{html_text(variant['variant'])}: "
                     f"{html_text(variant['label'])}</h2><p><code>{html_text(overrides)}</code> · "
                     f"{html_text(variant['complete'])} of {html_text(variant['trials'])} trials complete</p>")
        parts.append(_metrics_table(variant["metrics"]))
    parts.append(_sharpe_plot(data))
    parts += ["<h2 id='trials'>Trials</h2>", _trials_table(data["trials"])]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{REPORT_STYLE}</style></head>
<body><h1>{title}</h1>
{''.join(parts)}
</body></html>
"""


def write_page(directory: Path, data: dict[str, Any]) -> Path:
    """Write ``directory/sweep.html`` atomically."""
    return durable.write_text(Path(directory) / PAGE_FILE, page_html(data))
