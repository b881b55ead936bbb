"""What each picture of ``report.html`` shows: checked on the plot specs and on the drawn matplotlib figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.dates import ConciseDateFormatter

from foxhunt.trainer.report import read_equity
from foxhunt.trainer.report_figures import EpochAxis, adaptive_plots, draw, equity_plot, series_plot

DOCS = {"epsilon.branch": "exploration rate per action branch [Branch]", "health.count": "updates observed this fold"}


def rows(**slots: Any) -> list[dict[str, Any]]:
    """Two folds of three epochs; each keyword is a slot and its six values, one per epoch in order."""
    return [{"fold": index // 3, "epoch": index % 3, "adaptive": {name: values[index] for name, values in slots.items()}}
            for index in range(6)]


def test_a_counter_is_a_whole_number_that_never_falls_within_a_fold_and_grows() -> None:
    metrics = rows(**{
        "health.count": [400.0, 800.0, 1200.0, 400.0, 800.0, 1200.0],  # counts, starting again with each fold
        "epsilon.fold_start": [0.0, 0.0, 0.0, 96.0, 96.0, 96.0],  # grows from one fold to the next
        "cql.alpha": [1.0] * 6,  # a whole number that never grows: a value
        "support.half_width": [10.0, 11.0, 9.0, 10.0, 10.0, 10.0],  # whole numbers that fall: a value
        "tau.value": [0.005, 0.006, 0.007, 0.008, 0.009, 0.01],  # grows, but not in whole numbers: a value
    })
    plots, counters = adaptive_plots(metrics, DOCS, EpochAxis.of(metrics))
    assert [(c.name, c.by_fold) for c in counters] == [
        ("epsilon.fold_start", (("0", 0.0), ("1", 96.0))), ("health.count", (("0", 1200.0), ("1", 1200.0)))]
    assert counters[1].doc == "updates observed this fold"
    assert [plot.title.split(":")[0] for plot in plots] == ["cql.*", "support.*", "tau.*"]
    plotted = {panel.ylabel for plot in plots for panel in plot.panels}
    assert plotted == {"cql.alpha", "support.half_width", "tau.value"}  # no counter among the values


def test_each_slot_group_is_one_figure_with_a_panel_legend_and_y_label_per_slot() -> None:
    metrics = rows(**{
        "epsilon.branch": [[0.6, 0.5, 0.55, 0.62]] * 6,
        "health.value": [0.5, 0.6, 0.7, 0.5, 0.6, 0.7],
        "health.raw": [0.9, 0.8, 0.7, 0.9, 0.8, 0.7],
        "gamma.branch": [[0.99, 0.98, 0.97, 0.96]] * 6,
    })
    plots, counters = adaptive_plots(metrics, DOCS, EpochAxis.of(metrics))
    assert counters == []
    by_group = {plot.title.split(":")[0]: plot for plot in plots}
    assert set(by_group) == {"epsilon.*", "gamma.*", "health.*"}
    assert by_group["epsilon.*"].notes == (("epsilon.branch", DOCS["epsilon.branch"]),)
    for group, plot in by_group.items():
        figure = draw(plot)
        axes = figure.get_axes()
        assert len(axes) == len(plot.panels)
        for axis, panel in zip(axes, plot.panels):
            assert axis.get_ylabel() == panel.ylabel and panel.ylabel.startswith(group[:-1])
            assert [text.get_text() for text in axis.get_legend().get_texts()] == [line.label for line in panel.lines]
    # A [Branch] slot's lanes are named after the branches; an undocumented one by its index
    assert [line.label for line in by_group["epsilon.*"].panels[0].lines] == ["direction", "magnitude", "order_type", "urgency"]
    assert [line.label for line in by_group["gamma.*"].panels[0].lines] == [f"gamma.branch[{i}]" for i in range(4)]
    assert [panel.ylabel for panel in by_group["health.*"].panels] == ["health.raw", "health.value"]


def test_per_epoch_plots_are_drawn_against_epochs_with_each_fold_marked_and_its_line_broken() -> None:
    metrics = [{**row, "losses": {"c51": 2.0 - 0.1 * i}} for i, row in enumerate(rows(**{"tau.value": [0.01] * 6}))]
    plot = series_plot("loss per component", metrics, "losses", "loss", EpochAxis.of(metrics), log=True)
    assert plot is not None and plot.marks == ((-0.5, "fold 0"), (2.5, "fold 1"))
    bottom = draw(plot).get_axes()[-1]
    assert [label.get_text() for label in bottom.get_xticklabels()] == ["0", "1", "2", "0", "1", "2"]
    assert bottom.get_xlabel().startswith("epoch")
    (line,) = plot.panels[0].lines
    assert np.isnan(line.y[3]) and line.x[3] == 2.5  # fold 1's first epoch is not joined to fold 0's last
    single = EpochAxis.of(metrics[:3])  # one fold: no boundary to mark
    assert single.marks == () and single.xlabel == "epoch"


def write_equity(path: Path, stamps: list[str]) -> Path:
    lines = ["timestamp,agent,buy_and_hold,flat", *(f"{stamp},{100 + i},{100 - i},100" for i, stamp in enumerate(stamps))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_equity_is_drawn_against_the_bar_dates_and_bar_numbers_only_without_dates(tmp_path: Path) -> None:
    stamps = ["2020-01-01T00:00:00.000000000", "2020-01-01T01:00:00.000000000", "2020-01-01T02:00:00.000000000"]
    plot = equity_plot(0, read_equity(write_equity(tmp_path / "dated.csv", stamps)), "test equity", "test")
    assert plot.xlabel == "test window: bar date"
    assert [panel.ylabel for panel in plot.panels] == ["equity (account currency)", "drawdown (account currency)"]
    agent = plot.panels[0].lines[0]
    assert agent.x[0] == np.datetime64("2020-01-01T00:00") and agent.x[-1] == np.datetime64("2020-01-01T02:00")
    assert isinstance(draw(plot).get_axes()[-1].xaxis.get_major_formatter(), ConciseDateFormatter)

    undated = equity_plot(1, read_equity(write_equity(tmp_path / "undated.csv", ["a", "b", "c"])), "test equity", "test")
    assert undated.xlabel == "test window: bar" and undated.panels[0].lines[0].x.tolist() == [0.0, 1.0, 2.0]
