"""``report.html``: what a run did, as pictures that open in a browser with no network.

Built only from the run directory's files (``summary.json``, ``metrics.jsonl``,
``equity/fold_K.csv`` and ``equity/fold_K_validation.csv``), so ``foxhunt
report RUN_DIR`` can rebuild it at any time. Test figures (out of sample) come
first; validation figures (the window each fold's epoch was chosen on) follow
under their own heading, so the two are never read as one. Plots are matplotlib
PNGs embedded as base64 data URIs: one self-contained file, no scripts, no
external assets.

The run's files are data, not trusted markup: a tampered ``summary.json`` or
``metrics.jsonl`` could hold ``<script>`` anywhere, so every value that reaches
the page, numbers included, goes through :func:`_text` or :func:`_figure` (a
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
import io
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from foxhunt.durable import write_bytes
from foxhunt.errors import FoxhuntError
from foxhunt.trainer.run_dir import equity_file_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["build_report", "read_summary", "read_metrics", "read_equity"]

METRIC_COLUMNS = ("net_pnl", "sharpe", "sortino", "max_drawdown", "turnover", "fills", "round_trips")
POLICIES = ("agent", "buy_and_hold", "flat")
# Per window: the summary key of its all-fold figures, the section heading, and what its equity plot is called.
WINDOW_SECTIONS = {
    "test": ("overall", "Test results: out of sample (each fold's chosen policy, backtested once on its test window)",
             "test equity (out of sample)"),
    "validation": ("validation_overall",
                   "Validation results: the selection window (the best epoch was chosen here, so these are optimistic)",
                   "validation equity (selection window)"),
}


# The largest magnitude plotted as it is: matplotlib's tick and margin arithmetic overflows near the float64
# limit (equity of 1e308 raised "arange: cannot compute length"), so larger curves are drawn in units of a
# power of ten, named on the axis.
PLAIN_LIMIT = 1e12


def _text(value: Any) -> str:
    """Any value as HTML text: escaped, quotes included (it may land in an attribute)."""
    return html.escape(str(value), quote=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _figure(value: Any, spec: str = ".4g") -> str:
    """A number formatted with ``spec``; anything else (a tampered file's string or list) as escaped text."""
    return format(value, spec) if _is_number(value) else _text(value)


def _plot_label(text: Any) -> str:
    # matplotlib reads $...$ as mathematics and fails on what it cannot typeset: names are data, shown literally.
    return str(text).replace("$", r"\$")


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


def _units(series: list[np.ndarray]) -> tuple[float, str]:
    """The power of ten to divide by so that every value can be plotted, and its axis note ("" for none)."""
    finite = [np.abs(values[np.isfinite(values)]) for values in series]
    largest = max((float(values.max()) for values in finite if values.size), default=0.0)
    if largest < PLAIN_LIMIT:
        return 1.0, ""
    exponent = int(math.floor(math.log10(largest)))
    return 10.0**exponent, f" (× 1e{exponent})"


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
    return f'<img alt="{_text(alt)}" src="data:image/png;base64,{encoded}">'


def _equity_plot(fold: int, curves: dict[str, np.ndarray], title: str, window: str) -> str:
    figure, (top, bottom) = _subplots(2, 1, figsize=(9, 5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    drawn = {name: curves[name] for name in ("agent", "buy_and_hold", "flat") if name in curves}
    scale, unit = _units(list(drawn.values()))
    for (name, values), style in zip(drawn.items(), ("-", "--", ":")):
        values = values / scale
        x = np.arange(len(values))
        top.plot(x, values, style, label=name.replace("_", " "))
        with np.errstate(invalid="ignore"):  # an infinite peak has no drawdown: NaN, which matplotlib leaves out
            drawdown = values - np.maximum.accumulate(values)
        bottom.plot(x, drawdown, style, label=name.replace("_", " "))
    top.set_title(f"fold {fold}: {title}")
    top.set_ylabel(f"equity{unit}")
    if drawn:
        top.legend(loc="best")
    bottom.set_ylabel(f"drawdown{unit}")
    bottom.set_xlabel(f"{window} bar")
    return _figure_to_img(figure, f"{window} equity and drawdown, fold {fold}")


def _series_plot(title: str, series: dict[str, list[float]], ylabel: str, log: bool = False) -> str:
    figure, axis = _subplots(figsize=(9, 3.5))
    arrays = {name: np.asarray(values, dtype=np.float64) for name, values in series.items()}
    scale, unit = (1.0, "") if log else _units(list(arrays.values()))  # symlog draws any finite magnitude
    for name, values in sorted(arrays.items()):
        axis.plot(np.arange(len(values)), values / scale, label=_plot_label(name))
    axis.set_title(title)
    axis.set_xlabel("epoch (all folds, in order)")
    axis.set_ylabel(f"{ylabel}{unit}")
    if log:
        axis.set_yscale("symlog", linthresh=1e-3)
    if len(series) <= 12:
        axis.legend(loc="best", fontsize=7)
    return _figure_to_img(figure, title)


def _actions_plot(actions: dict[str, Any]) -> str:
    figure, axes = _subplots(1, len(actions), figsize=(3 * max(len(actions), 1), 3))
    axes = np.atleast_1d(axes)
    for axis, (branch, counts) in zip(axes, sorted(actions.items())):
        pairs = counts.items() if isinstance(counts, dict) else enumerate(counts if isinstance(counts, list) else [])
        shown = [(_plot_label(label), float(value)) for label, value in pairs if _is_number(value)]
        total = sum(value for _, value in shown) or 1.0
        axis.bar([label for label, _ in shown], [value / total for _, value in shown])
        axis.set_title(_plot_label(str(branch).lower()))
        axis.tick_params(axis="x", labelrotation=45, labelsize=7)
    axes[0].set_ylabel("share of actions")
    return _figure_to_img(figure, "action distribution per branch")


def _collect_series(metrics: list[dict[str, Any]], key: str) -> dict[str, list[float]]:
    """Per-epoch numbers under ``key`` by name (a list value gives ``name[i]`` series); other values are skipped."""
    series: dict[str, list[float]] = defaultdict(list)
    for row in metrics:
        values = row.get(key)
        for name, value in (values.items() if isinstance(values, dict) else ()):
            if isinstance(value, list):
                for index, item in enumerate(value):
                    if _is_number(item):
                        series[f"{name}[{index}]"].append(float(item))
            elif _is_number(value):
                series[name].append(float(value))
    return dict(series)


def _summary_table(summary: dict[str, Any], window: str) -> str:
    """Per fold and all-fold figures of every policy on ``window`` ("test" or "validation")."""
    header = "".join(f"<th>{_text(c)}</th>" for c in ("fold", "policy", *METRIC_COLUMNS))
    rows = []
    for fold in summary.get("folds", []):
        for policy in POLICIES:
            metrics = fold.get(window, {}).get(policy, {})
            cells = "".join(f"<td>{_figure(metrics.get(c, float('nan')))}</td>" for c in METRIC_COLUMNS)
            rows.append(f"<tr><td>{_text(fold.get('fold'))}</td><td>{_text(policy)}</td>{cells}</tr>")
    overall = summary.get(WINDOW_SECTIONS[window][0], {})
    for policy in POLICIES:
        metrics = overall.get(policy, {})
        if metrics:
            cells = "".join(f"<td>{_figure(metrics.get(c, float('nan')))}</td>" for c in METRIC_COLUMNS)
            rows.append(f"<tr class='overall'><td>all</td><td>{_text(policy)}</td>{cells}</tr>")
    return f"<table class='{_text(window)}'><tr>{header}</tr>{''.join(rows)}</table>"


def _account_notice(summary: dict[str, Any], window: str, key: str, describe: Any, lead: str) -> list[str]:
    """One notice naming every fold and policy whose ``window`` figures hold ``key``, each described by ``describe``."""
    found = [
        f"fold {_text(fold.get('fold'))} {_text(policy.replace('_', ' '))}: {describe(metrics)}"
        for fold in summary.get("folds", [])
        for policy in POLICIES
        if key in (metrics := fold.get(window, {}).get(policy, {}))
    ]
    return [f"<p class='bankrupt'>{lead}: {'; '.join(found)}</p>"] if found else []


def _bankruptcies(summary: dict[str, Any], window: str) -> list[str]:
    """Every fold and policy whose account went bankrupt on ``window``, and the bar."""
    return _account_notice(
        summary, window, "bankrupt_bar", lambda metrics: f"bankrupt at bar {_text(metrics['bankrupt_bar'])}",
        "<strong>Bankrupt</strong> (equity at or below zero; the backtest traded no more after that bar and its "
        "figures include the ruin)",
    )


def _margin_calls(summary: dict[str, Any], window: str) -> list[str]:
    """Every fold and policy whose position the margin cut on ``window``: how often, from which bar."""
    return _account_notice(
        summary, window, "margin_calls",
        lambda metrics: f"{_text(metrics['margin_calls'])} from bar {_text(metrics.get('first_margin_call_bar'))}",
        "<strong>Margin calls</strong> (a position larger than the account's margin allowed, cut at the market)",
    )


def _fold_number(value: Any) -> int | None:
    """The fold's index when it is one (it names the equity files); None for anything a tampered file holds."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _window_section(run_dir: Path, summary: dict[str, Any], window: str) -> list[str]:
    """The heading, table and per-fold equity plots of one window."""
    _, heading, plot_title = WINDOW_SECTIONS[window]
    parts = [f"<h2 id='{_text(window)}'>{_text(heading)}</h2>", *_bankruptcies(summary, window),
             *_margin_calls(summary, window),
             _summary_table(summary, window)]
    for fold in summary.get("folds", []):
        number = _fold_number(fold.get("fold"))
        path = run_dir / "equity" / equity_file_name(number, window) if number is not None else None
        if path is not None and path.is_file():
            parts.append(_equity_plot(number, read_equity(path), plot_title, window))
    return parts


def _fault_notice(summary: dict[str, Any]) -> list[str]:
    """The numerical fault that stopped the run (summary.json's ``fault``), first on the page."""
    fault = summary.get("fault")
    if not isinstance(fault, dict):
        return []
    return [f"<p class='bankrupt'><strong>Stopped by a numerical fault</strong> in fold {_text(fault.get('fold'))}, "
            f"epoch {_text(fault.get('epoch'))}: the first NaN or infinity came from {_text(fault.get('source'))}. "
            "The figures below cover only the folds finished before it.</p>"]


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
    sections = [*_fault_notice(summary), *_window_section(run_dir, summary, "test"),
                *_window_section(run_dir, summary, "validation")]
    budgets = metrics[-1].get("budgets") if metrics else None
    if isinstance(budgets, dict) and budgets:
        cells = "".join(f"<tr><td>{_text(name)}</td><td>{_figure(share, '.3f')}</td></tr>"
                        for name, share in sorted(budgets.items()))
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
    actions = metrics[-1].get("actions") if metrics else None
    if isinstance(actions, dict) and actions:
        sections.append("<h2>Action distribution per branch (last epoch)</h2>")
        sections.append(_actions_plot(actions))
    title = _text(f"foxhunt run {run_dir.name}")
    document = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 1000px; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
tr.overall {{ font-weight: bold; }}
p.bankrupt {{ color: #a00; }}
img {{ display: block; margin: 1em 0; max-width: 100%; }}
</style></head>
<body><h1>{title}</h1>
<p>Dataset: {_text(summary.get('data', ''))} &middot; seed {_text(summary.get('seed', ''))}
&middot; best epoch per fold chosen by validation {_text(summary.get('validation_metric', ''))}</p>
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
