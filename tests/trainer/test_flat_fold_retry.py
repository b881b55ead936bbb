"""``[train] flat_fold_retries``: a fold whose last epoch made no trade on validation trains its epochs again from
the networks it has, after the fold boundary; at most R times a fold, every epoch selectable, resumable.

The tiny run's greedy policy never trades on its 80-bar validation windows (every row has ``fills`` 0), so its
folds are flat without any help: the retries below fire on the real run's own validation backtests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from trainer_testkit import (StopAfter, metric_rows, network_copy, record_entered_folds, record_fold_starts,
                             tiny_trainer_config)

from foxhunt.errors import ConfigError
from foxhunt.trainer.report import build_report
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

# Fields of a metrics row that a rerun of the same seed reproduces (timings and memory do not).
REPRODUCED = ("fold", "epoch", "losses", "grad_norms", "adaptive", "validation", "updates", "actions")


def reproduced(row: dict) -> dict:
    return {key: row[key] for key in REPRODUCED if key in row}


def test_the_tiny_runs_folds_are_flat_on_validation(tmp_path: Path) -> None:
    # the premise of the tests below: without retries, every epoch's greedy policy makes no fill on validation
    Trainer(tiny_trainer_config(), RunDirectory(tmp_path / "run"), show_progress=False).run()
    rows = metric_rows(tmp_path / "run")
    assert len(rows) == 4 and all(row["validation"]["fills"] == 0 for row in rows)
    assert "Flat-fold retries" not in build_report(tmp_path / "run").read_text(encoding="utf-8")


def test_a_flat_fold_trains_its_epochs_again_as_a_burn_in_would_have(tmp_path: Path) -> None:
    # A retry of fold 0 is a fold boundary and the fold's two epochs again, from the networks its epochs left:
    # the burn-in does the same before the fold's own epochs, so the retry's rows are the burn-in run's fold-0
    # rows, and fold 1 (retried too) starts from the same networks in both runs.
    Trainer(tiny_trainer_config("train.flat_fold_retries=1"), RunDirectory(tmp_path / "retried"), show_progress=False).run()
    Trainer(tiny_trainer_config("train.burn_in_epochs=2"), RunDirectory(tmp_path / "burned"), show_progress=False).run()
    retried, burned = metric_rows(tmp_path / "retried"), metric_rows(tmp_path / "burned")
    assert [(row["fold"], row["epoch"]) for row in retried] == [(0, e) for e in range(4)] + [(1, e) for e in range(4)]
    assert [row.get("flat_fold_retry") for row in retried] == [None, 1, None, None] * 2
    retry_of_fold_0 = [reproduced(row) | {"epoch": row["epoch"] - 2} for row in retried[2:4]]
    assert retry_of_fold_0 == [reproduced(row) for row in burned[:2]]
    # the retry starts the replay's warm-up and the schedules again: its first epoch makes the first epoch's updates
    assert [row["updates"] for row in retried] == [8, 12, 8, 12] * 2


def planned_retries(rows: list[dict], epochs: int, most: int) -> list[int | None]:
    """The rule, read off a fold's rows: after the last epoch planned so far, no fill on validation plans
    ``epochs`` more, at most ``most`` times. Returns each row's expected ``flat_fold_retry`` mark."""
    planned, retries, marks = epochs, 0, []
    for row in rows:
        fire = row["epoch"] + 1 == planned and row["validation"]["fills"] == 0 and retries < most
        retries += fire
        planned += epochs if fire else 0
        marks.append(retries if fire else None)
    assert len(rows) == planned
    return marks


def test_retries_follow_the_rule_stop_at_the_configured_number_and_every_epoch_is_selectable(tmp_path: Path) -> None:
    run = tmp_path / "run"
    summary = Trainer(tiny_trainer_config("train.flat_fold_retries=2"), RunDirectory(run), show_progress=False).run()
    rows = metric_rows(run)
    for fold in (0, 1):
        fold_rows = [row for row in rows if row["fold"] == fold]
        assert [row["epoch"] for row in fold_rows] == list(range(len(fold_rows)))
        assert [row.get("flat_fold_retry") for row in fold_rows] == planned_retries(fold_rows, 2, 2)
    # fold 0 stays flat through both retries: 2 epochs, then 2 more per retry, and no third
    assert [row.get("flat_fold_retry") for row in rows if row["fold"] == 0] == [None, 1, None, 2, None, None]
    for fold in summary["folds"]:
        chosen = next(row for row in rows if (row["fold"], row["epoch"]) == (fold["fold"], fold["best_epoch"]))
        assert chosen["validation"] == {k: fold["validation"]["agent"][k] for k in chosen["validation"]}
        fold_rows = [row for row in rows if row["fold"] == fold["fold"]]
        assert chosen["validation"]["sharpe"] == max(row["validation"]["sharpe"] for row in fold_rows)
        assert fold["flat_fold_retries"] == sum(1 for row in fold_rows if "flat_fold_retry" in row)
    # report.html lists every retry: fold, the epoch after which it fired, its number
    report = build_report(run).read_text(encoding="utf-8")
    table = report[report.index("Flat-fold retries"):]
    table = table[:table.index("</table>")]
    fired = [(row["fold"], row["epoch"], row["flat_fold_retry"]) for row in rows if "flat_fold_retry" in row]
    assert table.count("<tr><td>") == len(fired) >= 2
    for fold, epoch, number in fired:
        assert f"<tr><td>{fold}</td><td>{epoch}</td><td>{number}</td></tr>" in table


def test_a_fold_that_trades_is_not_retried_and_the_run_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    Trainer(tiny_trainer_config(), RunDirectory(plain), show_progress=False).run()
    # The same run with retries on, where every epoch's validation is read as having traded: no retry fires.
    decide = Trainer._flat_fold_retry
    monkeypatch.setattr(Trainer, "_flat_fold_retry",
                        lambda trainer, fold, epoch, validation, position:
                        decide(trainer, fold, epoch, {**validation, "fills": 1.0}, position))
    on = tmp_path / "on"
    Trainer(tiny_trainer_config("train.flat_fold_retries=3"), RunDirectory(on), show_progress=False).run()
    assert [reproduced(row) for row in metric_rows(on)] == [reproduced(row) for row in metric_rows(plain)]
    plain_summary = json.loads((plain / "summary.json").read_text(encoding="utf-8"))
    on_summary = json.loads((on / "summary.json").read_text(encoding="utf-8"))
    assert on_summary["folds"] == plain_summary["folds"] and on_summary["overall"] == plain_summary["overall"]


def test_the_retry_starts_from_the_networks_the_folds_last_epoch_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_fold_starts = record_fold_starts(monkeypatch)
    after_epochs: list[dict[str, torch.Tensor]] = []
    entered = record_entered_folds(monkeypatch)  # the fold's data is prepared once: the retry reuses it
    trainer = Trainer(tiny_trainer_config("train.flat_fold_retries=1", "folds.only=0"), RunDirectory(tmp_path / "run"),
                      show_progress=False, on_epoch=lambda fold, epoch, _: after_epochs.append(network_copy(trainer)))
    trainer.run()
    assert len(at_fold_starts) == 2 and len(after_epochs) == 4  # the fold's start and its retry's; 2 + 2 epochs
    assert entered == [0]
    retry_start, last_epoch = at_fold_starts[1], after_epochs[1]
    assert all(torch.equal(retry_start[name], last_epoch[name]) for name in last_epoch)
    assert any(not torch.equal(retry_start[name], at_fold_starts[0][name]) for name in retry_start)


@pytest.mark.parametrize("stop_after", [2, 3])  # at the retry's decision, and inside the retry
def test_a_run_stopped_around_a_retry_resumes_to_the_uninterrupted_result(tmp_path: Path, stop_after: int) -> None:
    config = tiny_trainer_config("train.flat_fold_retries=1")
    whole = tmp_path / "whole"
    Trainer(config, RunDirectory(whole), show_progress=False).run()
    path = tmp_path / "run"
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, stop_after), show_progress=False).run() is None
    Trainer(config, RunDirectory(path, resume=True), show_progress=False).run(resume_from=path)
    assert [reproduced(row) for row in metric_rows(path)] == [reproduced(row) for row in metric_rows(whole)]
    assert (path / "summary.json").read_bytes() == (whole / "summary.json").read_bytes()


@pytest.mark.parametrize("value", ["-1", "1001"])
def test_a_retry_count_out_of_range_is_refused_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match="train.flat_fold_retries"):
        tiny_trainer_config(f"train.flat_fold_retries={value}")


def test_most_fold_epochs_counts_every_retry() -> None:
    assert tiny_trainer_config().train.most_fold_epochs == 2
    assert tiny_trainer_config("train.flat_fold_retries=3").train.most_fold_epochs == 8
