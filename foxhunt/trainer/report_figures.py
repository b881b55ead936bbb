"""The pictures of ``report.html``: what each one shows, as data, and how it is drawn.

A :class:`Plot` is the whole content of one picture: its panels, each with a
y label and labelled lines, the x axis's label, ticks and marks. The builders
here turn a run's files (already read by :mod:`foxhunt.trainer.report`) into
plots; :func:`draw` turns a plot into a matplotlib figure and :func:`png` into
the bytes the page embeds. Tests check the plots and the drawn figures, not
pixels.

Time axes: equity curves are drawn against their bars' timestamps (the equity
CSV's ``timestamp`` column; bar numbers only when it holds something that is
not a date); per-epoch plots against epochs, the folds one after another with
a dashed line where each fold starts.

Adaptive ISV values (``metrics.jsonl``'s ``adaptive``) are small multiples: one
picture per slot group (the name before the first dot: ``epsilon.*``,
``health.*``), one panel per slot, the slot's lanes in its legend (named after
the action branches when the slot's declaration says ``[Branch]``). A slot
declaration (:class:`foxhunt.isv.Slot`) carries a name, width, owner, ``doc``
and ``init``, no unit and no kind: the y label is the slot's name, its ``doc``
is shown under the picture, and counters are told apart by what they hold.
**A counter** is a slot whose every value in the run is a whole number, that
never decreases within a fold (it may start again at a fold boundary) and that
grows at least once, within a fold or from one fold to the next:
``health.count`` (updates seen this fold) and ``epsilon.fold_start`` (the step
counter when the fold began) are counters; a constant such as ``cql.alpha = 1``
is not. Counters are not plotted (in
hundreds, they flattened every other value to a line at zero); the report lists
their value at the end of each fold in a table.
"""

from __future__ import annotations

import io
import math
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from foxhunt.actions import Branch

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Line", "Panel", "Plot", "Counter", "EpochAxis", "equity_plot", "series_plot", "adaptive_plots",
           "draw", "png", "actions_png", "is_number", "plot_label"]

# The largest magnitude plotted as it is: matplotlib's tick and margin arithmetic overflows near the float64
# limit (equity of 1e308 raised "arange: cannot compute length"), so larger curves are drawn in units of a
# power of ten, named on the axis.
PLAIN_LIMIT = 1e12
MAX_TICKS = 16  # epoch ticks on a per-epoch axis; more rows than this are labelled every few epochs


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plot_label(text: Any) -> str:
    """A name as matplotlib draws it literally: names are data, and ``$...$`` would be typeset as mathematics."""
    return str(text).replace("$", r"\$")


@attrs.frozen
class Line:
    """One labelled curve; ``x`` holds numbers (epochs, bars) or ``datetime64`` timestamps."""

    label: str
    x: np.ndarray = attrs.field(eq=False)
    y: np.ndarray = attrs.field(eq=False)
    style: str = "-"


@attrs.frozen
class Panel:
    """One axes: its y label, its lines (every one named in the legend), a symmetric-log scale or a linear one."""

    ylabel: str
    lines: tuple[Line, ...]
    log: bool = False


@attrs.frozen
class Plot:
    """One picture: ``panels`` stacked over a shared x axis, ``ticks`` (position, label) replacing the default
    ones, ``marks`` (position, label) drawn as dashed vertical lines, ``notes`` (name, meaning) shown under it."""

    title: str
    alt: str
    xlabel: str
    panels: tuple[Panel, ...]
    ticks: tuple[tuple[float, str], ...] = ()
    marks: tuple[tuple[float, str], ...] = ()
    notes: tuple[tuple[str, str], ...] = ()
    heights: tuple[float, ...] = ()


@attrs.frozen
class Counter:
    """A counter slot (see the module's rule): its value at the last epoch of each fold, in fold order."""

    name: str
    doc: str
    by_fold: tuple[tuple[str, Any], ...]  # (fold, value): a number, or the lanes of a wider slot


@attrs.frozen
class EpochAxis:
    """The x axis of per-epoch plots: one position per ``metrics.jsonl`` row, the folds one after another."""

    ticks: tuple[tuple[float, str], ...]
    marks: tuple[tuple[float, str], ...]
    folds: tuple[Any, ...]  # the fold of each row, as the file gives it
    xlabel: str

    @classmethod
    def of(cls, metrics: Sequence[Mapping[str, Any]]) -> EpochAxis:
        folds = tuple(row.get("fold") for row in metrics)
        step = max(1, math.ceil(len(metrics) / MAX_TICKS))
        ticks = tuple((float(i), str(row.get("epoch", i))) for i, row in enumerate(metrics) if i % step == 0)
        marks = tuple((i - 0.5, f"fold {fold}") for i, fold in enumerate(folds) if i == 0 or fold != folds[i - 1])
        if len(marks) > 1:
            return cls(ticks, marks, folds, "epoch (folds one after another; a dashed line marks each fold's start)")
        return cls(ticks, (), folds, "epoch")


def _timestamps(stamps: Any, length: int) -> np.ndarray | None:
    """The equity file's timestamps as ``datetime64``, or None when they are missing or not all dates."""
    if stamps is None or len(stamps) != length:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns (and may one day fail) on time zones: not a run's format
            times = np.array(list(stamps), dtype="datetime64[ns]")
    except (ValueError, TypeError, OverflowError, Warning):
        return None
    return None if np.isnat(times).any() else times


def equity_plot(fold: int, columns: Mapping[str, np.ndarray], title: str, window: str) -> Plot:
    """Equity and drawdown of every policy in one fold's equity file, against the bars' timestamps."""
    drawn = {name: columns[name] for name in ("agent", "buy_and_hold", "flat") if name in columns}
    length = len(next(iter(drawn.values()))) if drawn else 0
    times = _timestamps(columns.get("timestamp"), length)
    equity, drawdown = [], []
    for (name, values), style in zip(drawn.items(), ("-", "--", ":")):
        x = times if times is not None and len(values) == length else np.arange(len(values), dtype=np.float64)
        with np.errstate(invalid="ignore"):  # an infinite peak has no drawdown: NaN, which matplotlib leaves out
            fall = values - np.maximum.accumulate(values)
        equity.append(Line(name.replace("_", " "), x, values, style))
        drawdown.append(Line(name.replace("_", " "), x, fall, style))
    xlabel = f"{window} window: bar date" if times is not None else f"{window} window: bar"
    return Plot(f"fold {fold}: {title}", f"{window} equity and drawdown, fold {fold}", xlabel,
                (Panel("equity (account currency)", tuple(equity)), Panel("drawdown (account currency)", tuple(drawdown))),
                heights=(2.0, 1.0))


def _points(metrics: Sequence[Mapping[str, Any]], key: str) -> dict[str, list[tuple[int, list[float]]]]:
    """Per name under ``key``: (row, lane values) of every row that holds numbers for it (a list gives lanes)."""
    found: dict[str, list[tuple[int, list[float]]]] = defaultdict(list)
    for row_index, row in enumerate(metrics):
        values = row.get(key)
        for name, value in (values.items() if isinstance(values, dict) else ()):
            lanes = value if isinstance(value, list) else [value]
            if lanes and all(is_number(lane) for lane in lanes):
                found[str(name)].append((row_index, [float(lane) for lane in lanes]))
    return dict(found)


def _lines(name: str, points: list[tuple[int, list[float]]], folds: Sequence[Any],
           labels: Sequence[str] | None = None) -> tuple[Line, ...]:
    """One line per lane of ``name``, broken where a fold starts (a fold's first epoch does not follow the last
    fold's last one: exploration and the adaptive values start again)."""
    width = max(len(lanes) for _, lanes in points)
    lines = []
    for lane in range(width):
        x: list[float] = []
        y: list[float] = []
        previous = None
        for row, lanes in points:
            if lane >= len(lanes):
                continue
            if previous is not None and folds[row] != folds[previous]:
                x.append(row - 0.5)
                y.append(math.nan)
            x.append(float(row))
            y.append(lanes[lane])
            previous = row
        label = name if width == 1 else labels[lane] if labels and len(labels) == width else f"{name}[{lane}]"
        lines.append(Line(label, np.array(x), np.array(y)))
    return tuple(lines)


def series_plot(title: str, metrics: Sequence[Mapping[str, Any]], key: str, ylabel: str, axis: EpochAxis,
                log: bool = False) -> Plot | None:
    """Every per-epoch number under ``key`` (``grad_norms``, ``losses``) in one panel; None when there is none."""
    found = _points(metrics, key)
    if not found:
        return None
    lines = tuple(line for name in sorted(found) for line in _lines(name, found[name], axis.folds))
    return Plot(title, title, axis.xlabel, (Panel(ylabel, lines, log),), axis.ticks, axis.marks)


def _is_counter(points: list[tuple[int, list[float]]], folds: Sequence[Any]) -> bool:
    values = [lane for _, lanes in points for lane in lanes]
    if not all(math.isfinite(v) and v == int(v) for v in values):
        return False
    grew = False
    for (before_row, before), (row, lanes) in zip(points, points[1:]):
        if len(lanes) != len(before):
            return False
        if folds[row] == folds[before_row] and any(b < a for a, b in zip(before, lanes)):
            return False  # across a fold boundary a counter may start again
        grew = grew or any(b > a for a, b in zip(before, lanes))
    return grew


def _lane_labels(doc: str, width: int) -> list[str] | None:
    # A declaration documents per-branch lanes as "[Branch]" (one lane per action branch, in Branch order).
    return [name.lower() for name in Branch.names()] if "[Branch]" in doc and width == Branch.size() else None


def adaptive_plots(metrics: Sequence[Mapping[str, Any]], docs: Mapping[str, str],
                   axis: EpochAxis) -> tuple[list[Plot], list[Counter]]:
    """One :class:`Plot` per slot group of ``adaptive`` values (a panel per slot, counters left out) and the
    counters, each with its value at the last epoch of every fold. ``docs``: each slot's declared meaning."""
    found = _points(metrics, "adaptive")
    counters, groups = [], defaultdict(list)
    for name in sorted(found):
        points = found[name]
        if _is_counter(points, axis.folds):
            last: dict[str, Any] = {}
            for row, lanes in points:
                last[str(axis.folds[row])] = lanes[0] if len(lanes) == 1 else lanes
            counters.append(Counter(name, docs.get(name, ""), tuple(last.items())))
        else:
            groups[name.split(".")[0]].append(name)
    plots = []
    for group, names in groups.items():
        panels = tuple(
            Panel(name, _lines(name, found[name], axis.folds, _lane_labels(docs.get(name, ""), len(found[name][0][1]))))
            for name in names
        )
        notes = tuple((name, docs[name]) for name in names if docs.get(name))
        plots.append(Plot(f"{group}.*: adaptive values over training", f"adaptive values of {group}.*", axis.xlabel,
                          panels, axis.ticks, axis.marks, notes))
    return plots, counters


def _units(lines: Sequence[Line]) -> tuple[float, str]:
    """The power of ten to divide by so that every value can be plotted, and its axis note ("" for none)."""
    finite = [np.abs(line.y[np.isfinite(line.y)]) for line in lines]
    largest = max((float(values.max()) for values in finite if values.size), default=0.0)
    if largest < PLAIN_LIMIT:
        return 1.0, ""
    exponent = int(math.floor(math.log10(largest)))
    return 10.0**exponent, f" (× 1e{exponent})"


def _new_figure(width: float, height: float) -> Figure:
    """A headless figure. matplotlib (about half a second of imports) loads only when a report is drawn, and only
    through ``Figure``: no pyplot and no backend switch in the process that builds the report (PNGs use Agg)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def draw(plot: Plot) -> Figure:
    """The matplotlib figure of ``plot``: every panel with its legend and y label, the x axis labelled once."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    figure = _new_figure(9, 1.2 + 1.7 * (sum(plot.heights) if plot.heights else len(plot.panels)))
    grid = {"height_ratios": list(plot.heights)} if plot.heights else None
    axes = np.atleast_1d(figure.subplots(len(plot.panels), 1, sharex=True, squeeze=False, gridspec_kw=grid)[:, 0])
    for axis, panel in zip(axes, plot.panels):
        scale, unit = (1.0, "") if panel.log else _units(panel.lines)  # symlog draws any finite magnitude
        for line in panel.lines:
            axis.plot(line.x, line.y / scale, line.style, label=plot_label(line.label))
        axis.set_ylabel(plot_label(panel.ylabel + unit), fontsize=8)
        if panel.log:
            axis.set_yscale("symlog", linthresh=1e-3)
        for position, _ in plot.marks:
            axis.axvline(position, color="0.6", linestyle="--", linewidth=0.8)
        if panel.lines:
            axis.legend(loc="best", fontsize=7, ncol=1 + len(panel.lines) // 6)
    for position, label in plot.marks:
        axes[0].annotate(plot_label(label), (position, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -10),
                         textcoords="offset points", fontsize=7, color="0.35")
    axes[0].set_title(plot_label(plot.title))
    bottom = axes[-1]
    bottom.set_xlabel(plot.xlabel)
    if plot.ticks:
        bottom.set_xticks([position for position, _ in plot.ticks], [plot_label(label) for _, label in plot.ticks])
    elif any(np.issubdtype(line.x.dtype, np.datetime64) for panel in plot.panels for line in panel.lines):
        locator = AutoDateLocator()
        bottom.xaxis.set_major_locator(locator)
        bottom.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    return figure


def png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return buffer.getvalue()


def actions_png(actions: Mapping[str, Any]) -> bytes:
    """Share of each sub-action per branch, one bar chart per branch."""
    figure = _new_figure(3 * max(len(actions), 1), 3)
    axes = np.atleast_1d(figure.subplots(1, len(actions)))
    for axis, (branch, counts) in zip(axes, sorted(actions.items())):
        pairs = counts.items() if isinstance(counts, dict) else enumerate(counts if isinstance(counts, list) else [])
        shown = [(plot_label(label), float(value)) for label, value in pairs if is_number(value)]
        total = sum(value for _, value in shown) or 1.0
        axis.bar([label for label, _ in shown], [value / total for _, value in shown])
        axis.set_title(plot_label(str(branch).lower()))
        axis.tick_params(axis="x", labelrotation=45, labelsize=7)
    axes[0].set_ylabel("share of actions")
    return png(figure)
