"""Honest walk-forward: each fold's best epoch is chosen on validation, and only its test window is reported.

Checked on the session's reference run (two folds of the tiny config): the
summary keeps test and validation figures apart, its test figures are a backtest
of the saved checkpoint on the test window, and the report shows both, labelled.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from structlog.testing import capture_logs
from trainer_testkit import TINY, TINY_DATA, StopAfter, read_summary

from foxhunt.checkpoint_backtest import backtest_checkpoint
from foxhunt.checkpoint import seal_metadata
from foxhunt.config import load_config
from foxhunt.data import load_from_config
from foxhunt.env.backtest import equity_ratios
from foxhunt.errors import CheckpointError
from foxhunt.features import compute_features
from foxhunt.folds import make_folds
from foxhunt.testing.learning_check import CHECKS, run_check
from foxhunt.trainer.evaluation import POLICIES, SUMMARY_KEYS, combine, overall
from foxhunt.trainer.report import read_equity
from foxhunt.trainer.resume import RESUME_NAME
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def tiny_config():
    return load_config(None, [*TINY, f'data.source="{TINY_DATA}"', 'run.device="cpu"'])


def test_summary_windows_are_the_fold_layout_and_test_figures_are_not_validation_figures(reference_run: Path) -> None:
    config = tiny_config()
    market = load_from_config(config.data)
    folds = make_folds(len(market), config.folds, compute_features(market).warmup)
    summary = read_summary(reference_run)
    assert len(summary["folds"]) == len(folds)
    for reported, fold in zip(summary["folds"], folds, strict=True):
        assert reported["train_window"] == [fold.train.start, fold.train.stop]
        assert reported["validation_window"] == [fold.validation.start, fold.validation.stop]
        assert reported["test_window"] == [fold.test.start, fold.test.stop]
        assert set(reported["test"]) == set(reported["validation"]) == set(POLICIES)
        # buy-and-hold on other bars earns something else: the two sections really hold two windows
        assert reported["test"]["buy_and_hold"] != reported["validation"]["buy_and_hold"]
    assert summary["overall"] != summary["validation_overall"]


def test_metrics_jsonl_keeps_per_epoch_validation_and_the_best_epoch_is_the_one_reported(reference_run: Path) -> None:
    rows = [json.loads(line) for line in (reference_run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    summary = read_summary(reference_run)
    for fold in summary["folds"]:
        epochs = [row for row in rows if row["fold"] == fold["fold"]]
        sharpes = [row["validation"]["sharpe"] for row in epochs]
        assert fold["best_epoch"] == int(np.argmax(sharpes))  # the first best, by the default validation metric
        assert epochs[fold["best_epoch"]]["validation"] == fold["validation"]["agent"]


@pytest.mark.parametrize("fold", [0, 1])
def test_reported_test_figures_are_a_fresh_backtest_of_the_saved_checkpoint(reference_run: Path, fold: int) -> None:
    summary = read_summary(reference_run)
    outcome = backtest_checkpoint(reference_run / "checkpoints" / f"fold_{fold}")
    reported = summary["folds"][fold]
    assert list(outcome.window) == reported["test_window"] and outcome.window_name == "test"
    assert outcome.metrics == reported["test"]
    curves = read_equity(reference_run / "equity" / f"fold_{fold}.csv")
    for policy in POLICIES:
        np.testing.assert_array_equal(curves[policy], np.asarray(outcome.curves[policy]))


def test_overall_chains_the_test_equity_curves(reference_run: Path) -> None:
    summary = read_summary(reference_run)
    bars_per_year = load_from_config(tiny_config().data).instrument.bars_per_year
    for policy in POLICIES:
        curves = [read_equity(reference_run / "equity" / f"fold_{f['fold']}.csv")[policy] for f in summary["folds"]]
        returns = np.concatenate([c[1:] / c[:-1] - 1.0 for c in curves])
        sharpe, _, drawdown = equity_ratios(np.cumprod(np.concatenate([[1.0], 1.0 + returns])), bars_per_year)
        assert summary["overall"][policy]["sharpe"] == pytest.approx(sharpe, rel=1e-12, abs=1e-12)
        assert summary["overall"][policy]["max_drawdown"] == pytest.approx(drawdown, rel=1e-12, abs=1e-12)
        assert set(summary["overall"][policy]) >= set(SUMMARY_KEYS)


def test_combine_is_the_sharpe_of_the_joined_returns_not_the_mean_of_fold_sharpes() -> None:
    # A calm winning fold and a wild losing one: each fold's Sharpe says little about the two together.
    calm = 100.0 * np.cumprod([1.0, 1.01, 1.012, 1.009, 1.011])
    wild = 100.0 * np.cumprod([1.0, 0.8, 1.15, 0.85, 1.1])
    combined = combine([calm, wild], [4, 5], [1, 2], [0.5, 1.0], bars_per_year=252.0)
    joined = np.concatenate([calm[1:] / calm[:-1], wild[1:] / wild[:-1]])
    expected = equity_ratios(np.cumprod(np.concatenate([[1.0], joined])), 252.0)[0]
    mean_of_folds = (equity_ratios(calm, 252.0)[0] + equity_ratios(wild, 252.0)[0]) / 2
    assert combined["sharpe"] == pytest.approx(expected, rel=1e-12)
    assert abs(combined["sharpe"] - mean_of_folds) > 1.0
    assert combined["net_pnl"] == pytest.approx((calm[-1] - calm[0]) + (wild[-1] - wild[0]))
    assert combined["fills"] == 9 and combined["round_trips"] == 3 and combined["turnover"] == 1.5


def test_overall_names_the_folds_whose_account_went_bankrupt() -> None:
    solvent, ruined = [100.0, 101.0, 102.0], [100.0, -50.0, -50.0]

    def fold(index: int, agent_curve: list[float], bankrupt_bar: int | None) -> dict:
        agent = {"fills": 2, "round_trips": 1, "turnover": 1.0,
                 **({"bankrupt_bar": bankrupt_bar} if bankrupt_bar is not None else {})}
        metrics = {"agent": agent, "buy_and_hold": {"fills": 1, "round_trips": 0, "turnover": 1.0},
                   "flat": {"fills": 0, "round_trips": 0, "turnover": 0.0}}
        curves = {"agent": agent_curve, "buy_and_hold": solvent, "flat": [100.0] * 3}
        return {"fold": index, "test": metrics, "curves": {"test": curves}}

    figures = overall([fold(0, solvent, None), fold(1, ruined, 412), fold(2, ruined, 530)], "test", 252.0)
    assert figures["agent"]["bankrupt_folds"] == [1, 2]
    assert figures["agent"]["net_pnl"] == pytest.approx(2.0 - 150.0 - 150.0)
    assert "bankrupt_folds" not in figures["buy_and_hold"] and "bankrupt_folds" not in figures["flat"]


def test_overall_reads_folds_that_counted_round_trips_as_trades() -> None:
    """A run stopped by a foxhunt that had only ``trades`` (round trips) and resumed by this one: its finished
    folds' round trips are summed under the new name, and no fills figure is made up for them."""
    curve = [100.0, 101.0, 102.0]
    old = {"trades": 2, "turnover": 1.0}
    new = {"fills": 5, "round_trips": 1, "turnover": 1.0}
    results = [{"fold": k, "test": {p: figures for p in POLICIES}, "curves": {"test": {p: curve for p in POLICIES}}}
               for k, figures in enumerate((old, new))]
    figures = overall(results, "test", 252.0)["agent"]
    assert figures["round_trips"] == 3 and "fills" not in figures and "trades" not in figures


def test_report_shows_test_results_first_and_validation_results_apart(reference_run: Path) -> None:
    text = (reference_run / "report.html").read_text(encoding="utf-8")
    test_heading, validation_heading = text.index("Test results: out of sample"), text.index("Validation results")
    assert test_heading < validation_heading
    assert text.index("<table class='test'>") < validation_heading < text.index("<table class='validation'>")
    for fold in (0, 1):
        assert f'alt="test equity and drawdown, fold {fold}"' in text
        assert f'alt="validation equity and drawdown, fold {fold}"' in text


def test_resume_refuses_finished_folds_recorded_without_a_test_window(tmp_path: Path) -> None:
    path = tmp_path / "run"
    config = tiny_config()
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 3), show_progress=False).run() is None
    metadata_path = path / "checkpoints" / RESUME_NAME / "metadata.json"
    metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
    assert len(metadata["position"]["results"]) == 1  # fold 0 finished, fold 1 under way
    old = metadata["position"]["results"][0]
    del old["test"]  # what a run stopped by the foxhunt before test windows recorded
    # Sealed again so the edit reaches this check: such a run predates integrity records, and unsealed it is
    # refused earlier, as damaged or altered (tests/test_checkpoint_tampering.py).
    seal_metadata(metadata, metadata["integrity"]["tensors_sha256"])
    metadata_path.write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(CheckpointError, match="without a test window.*Start a new run"):
        Trainer(config, RunDirectory(path, resume=True), show_progress=False).run(resume_from=path)


def warned_folds(logs: list[dict]) -> set[int]:
    return {entry["fold"] for entry in logs if entry["event"] == "fold policy made no trade on validation"}


def test_a_fold_whose_policy_never_trades_on_validation_is_warned_about(tmp_path: Path) -> None:
    # The tiny run's folds make no trade (a dozen updates an epoch leave the agent holding); the planted market's
    # short learning check trades (seed 2, one torch thread as the learning-quality test runs it: 35 fills on its
    # validation window).
    with capture_logs() as logs:
        Trainer(tiny_config(), RunDirectory(tmp_path / "tiny"), show_progress=False).run()
    summary = read_summary(tmp_path / "tiny")
    flat = {fold["fold"] for fold in summary["folds"] if fold["validation"]["agent"]["fills"] == 0}
    assert flat and warned_folds(logs) == flat
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with capture_logs() as logs:
            run = run_check(CHECKS["planted"], 2, tmp_path / "planted")
    finally:
        torch.set_num_threads(threads)
    assert run.round_trips > 0 and warned_folds(logs) == set()
