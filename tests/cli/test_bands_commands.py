"""``foxhunt bands fit`` on real tiny runs, and ``foxhunt train --bands`` stopping (or not) on them, in-process.

Two tiny runs of one fold (seeds 0 and 1) are trained once for the module and fitted; the banded runs are seed 0 again, so
every fitted band holds them (with two runs a run sits sigma/sqrt(2) from the mean), and each test moves the
band of one metric where it wants the run to be out of band.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

import trainer_testkit as kit

pytestmark = pytest.mark.usefixtures("_private_feature_cache")  # tests/cli/conftest.py

METRIC = "validation.turnover"
ONE_FOLD = (*kit.TINY, "folds.n_folds=1")  # two epochs: enough for patience 2, and half the time of two folds


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    """A folder of two finished tiny runs, seeds 0 and 1."""
    root = tmp_path_factory.mktemp("sweep")
    for seed in (0, 1):
        result = kit.invoke(*kit.train_args(root / f"seed{seed}", ONE_FOLD), "--seed", str(seed))
        assert result.exit_code == 0, result.output + result.stderr
    return root


@pytest.fixture(scope="module")
def fitted(sweep: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bands") / "bands.toml"
    result = kit.invoke("bands", "fit", str(sweep), "--output", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    assert f"wrote {out}:" in result.stdout and "from 2 runs" in result.stdout
    return out


def edited(fitted: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = tomllib.loads(fitted.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "edited.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def move_band(epochs: set[tuple[int, int]], metric: str = METRIC) -> Callable[[dict[str, Any]], None]:
    """Put ``metric``'s band far from where the run will be, at ``epochs``."""
    def change(data: dict[str, Any]) -> None:
        for bands in data["epochs"]:
            if (bands["fold"], bands["epoch"]) in epochs:
                bands["mean"][metric] += 1e6
    return change


def metrics_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def test_fit_on_a_sweep_folder_of_real_runs_bands_every_epoch(sweep: Path, fitted: Path) -> None:
    bands = tomllib.loads(fitted.read_text(encoding="utf-8"))
    assert (bands["version"], bands["k"], bands["patience"]) == (1, 3.0, 2)
    assert bands["runs"] == [str(sweep / "seed0"), str(sweep / "seed1")]
    assert {"losses.c51", "grad_norms.c51", "safety_clips", "adaptive.tau.value", "validation.sharpe",
            "adaptive.gamma.branch[0]"} <= set(bands["metrics"])
    assert [(b["fold"], b["epoch"]) for b in bands["epochs"]] == [(0, 0), (0, 1)]
    runs = [metrics_lines(sweep / f"seed{seed}") for seed in (0, 1)]
    for index, epoch_bands in enumerate(bands["epochs"]):
        values = [run[index]["losses"]["c51"] for run in runs]
        assert epoch_bands["mean"]["losses.c51"] == pytest.approx(sum(values) / 2)
        assert epoch_bands["sigma"]["losses.c51"] >= abs(values[0] - values[1]) / 2 ** 0.5 * (1 - 1e-9)
        assert all(sigma > 0 for sigma in epoch_bands["sigma"].values())  # floored: never zero width


def test_one_epoch_out_of_band_does_not_stop_and_epochs_beyond_the_file_are_not_checked(fitted: Path,
                                                                                        tmp_path: Path) -> None:
    def change(data: dict[str, Any]) -> None:
        move_band({(0, 0)})(data)
        data["epochs"] = [bands for bands in data["epochs"] if bands["epoch"] == 0]  # epoch 1 is beyond the file
    bands = edited(fitted, tmp_path, change)
    out = tmp_path / "run"
    result = kit.invoke(*kit.train_args(out, ONE_FOLD), "--seed", "0", "--bands", str(bands))
    assert result.exit_code == 0, result.output + result.stderr
    logs = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert [(log["metric"], log["fold"], log["epoch"]) for log in logs if log["event"] == "out of band"] == [
        (METRIC, 0, 0)]
    assert [(log["fold"], log["epoch"]) for log in logs if "beyond the bands file" in log["event"]] == [(0, 1)]
    assert "bands" not in kit.read_summary(out)
    assert tomllib.loads((out / "config.toml").read_text(encoding="utf-8"))["run"]["bands"] == str(bands)


def test_a_metric_out_of_band_for_patience_epochs_stops_the_run_like_a_fault(fitted: Path, tmp_path: Path) -> None:
    bands = edited(fitted, tmp_path, move_band({(0, 0), (0, 1)}))
    out = tmp_path / "run"
    result = kit.invoke(*kit.train_args(out, ONE_FOLD), "--seed", "0", "--bands", str(bands))
    assert result.exit_code == 4, result.output + result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert f"error: {bands}: {METRIC} = " in result.stderr
    assert "for 2 consecutive epochs (patience 2: fold 0 epoch 0, fold 0 epoch 1)" in result.stderr
    stop = kit.read_summary(out)["bands"]
    value = metrics_lines(out)[-1]["validation"]["turnover"]
    assert (stop["metric"], stop["value"], stop["fold"], stop["epoch"]) == (METRIC, value, 0, 1)
    assert stop["epochs"] == [[0, 0], [0, 1]] and stop["reason"] == "out of band" and stop["file"] == str(bands)
    assert stop["band"][0] > 1e5 > value
    assert kit.read_summary(out)["folds"] == []  # fold 0 stopped before its test backtest
    assert "Stopped by its regression bands" in (out / "report.html").read_text(encoding="utf-8")
    # the stopping epoch's checkpoints are kept: its metrics line and resume checkpoint, fold 0's best policy
    assert len(metrics_lines(out)) == 2
    metadata = json.loads((out / "checkpoints" / "resume" / "metadata.json").read_text(encoding="utf-8"))
    assert metadata["position"]["epoch"] == 2
    assert (out / "checkpoints" / "fold_0" / "tensors.safetensors").is_file()
    again = kit.invoke("train", "--resume", str(out), "--no-progress")  # finished, as a faulted run is
    assert again.exit_code == 2 and "Traceback" not in again.output


def test_a_bands_file_of_another_config_is_refused_before_training(fitted: Path, tmp_path: Path) -> None:
    def change(data: dict[str, Any]) -> None:
        data["metrics"].append("losses.huber")
        for bands in data["epochs"]:
            bands["mean"]["losses.huber"], bands["sigma"]["losses.huber"] = 1.0, 0.1
    bands = edited(fitted, tmp_path, change)
    out = tmp_path / "run"
    result = kit.invoke(*kit.train_args(out, ONE_FOLD), "--bands", str(bands))
    assert result.exit_code == 2, result.output + result.stderr
    assert f"error: {bands}: metrics: this run writes no metric losses.huber" in result.stderr
    assert not out.exists()  # refused before the first epoch: no run folder left behind


def test_a_missing_bands_file_is_refused_before_data_loads(tmp_path: Path) -> None:
    result = kit.invoke(*kit.train_args(tmp_path / "run"), "--bands", str(tmp_path / "none.toml"))
    assert result.exit_code == 2
    assert "none.toml: no such bands file" in result.stderr and not (tmp_path / "run").exists()


def test_train_help_documents_the_band_exit_code() -> None:
    text = kit.invoke("train", "--help").output
    assert "--bands" in text and "4 stopped by --bands" in text
