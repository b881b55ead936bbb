"""Regression bands fitted from ``metrics.jsonl`` files written here (no training): the numbers, the floor, the
file and its errors (:mod:`foxhunt.trainer.bands`)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from foxhunt.errors import ConfigError, FoxhuntError
from foxhunt.trainer.bands import BANDS_VERSION, fit_bands, flatten_metrics, load_bands, run_directories, write_bands


def line(fold: int, epoch: int, c51: float, sharpe: float, tau: float = 0.01, **extra: Any) -> dict[str, Any]:
    """A metrics.jsonl line with the fields bands read, and some they do not (timings, actions)."""
    return {"fold": fold, "epoch": epoch, "losses": {"c51": c51}, "grad_norms": {"c51": 2 * c51},
            "grad_norms_clipped": {"c51": c51}, "safety_clips": 0.0,
            "adaptive": {"tau.value": tau, "gamma.branch": [0.9, 0.95]},
            "validation": {"sharpe": sharpe}, "seconds": 1.5 + sharpe, "actions": {"DIRECTION": {"LONG": 3.0}},
            "diagnostics": [], **extra}


def write_run(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def three_runs(root: Path) -> list[Path]:
    losses = [1.0, 1.2, 1.4]
    return [write_run(root / f"seed{i}", [line(0, 0, c51, sharpe=0.5 * i), line(0, 1, c51 / 2, sharpe=0.5 * i),
                                          line(1, 0, c51, sharpe=-i)])
            for i, c51 in enumerate(losses)]


def test_flatten_names_each_banded_number_and_skips_timings_and_actions() -> None:
    assert flatten_metrics(line(0, 0, 1.0, 0.5)) == {
        "losses.c51": 1.0, "grad_norms.c51": 2.0, "grad_norms_clipped.c51": 1.0, "safety_clips": 0.0,
        "adaptive.tau.value": 0.01, "adaptive.gamma.branch[0]": 0.9, "adaptive.gamma.branch[1]": 0.95,
        "validation.sharpe": 0.5,
    }


def test_bands_are_mean_and_sample_deviation_over_runs_per_fold_and_epoch(tmp_path: Path) -> None:
    bands = fit_bands(three_runs(tmp_path), k=3)
    assert [(b.fold, b.epoch) for b in bands.epochs] == [(0, 0), (0, 1), (1, 0)]
    first = bands.at(0, 0)
    assert first.mean["losses.c51"] == pytest.approx(1.2)
    assert first.sigma["losses.c51"] == pytest.approx(statistics.stdev([1.0, 1.2, 1.4]))
    low, high = first.band("losses.c51", bands.k)
    assert (low, high) == pytest.approx((1.2 - 3 * 0.2, 1.2 + 3 * 0.2))
    assert bands.at(0, 1).mean["losses.c51"] == pytest.approx(0.6)
    assert bands.at(1, 0).mean["validation.sharpe"] == pytest.approx(-1.0)
    assert bands.at(2, 0) is None
    assert "seconds" not in bands.metrics and not any(name.startswith("actions") for name in bands.metrics)


def test_a_metric_identical_in_every_run_gets_a_floored_band_not_a_zero_width_one(tmp_path: Path) -> None:
    bands = fit_bands(three_runs(tmp_path), relative_floor=0.01, absolute_floor=1e-6)
    first = bands.at(0, 0)
    assert first.sigma["adaptive.tau.value"] == pytest.approx(0.01 * 0.01)  # tau is 0.01 in every run
    assert first.sigma["safety_clips"] == 1e-6  # 0 in every run: the absolute floor
    low, high = first.band("safety_clips", bands.k)
    assert low < 0.0 < high


def test_only_the_epochs_every_run_reached_are_banded(tmp_path: Path) -> None:
    runs = three_runs(tmp_path)
    short = write_run(tmp_path / "short", [line(0, 0, 1.1, 0.2)])
    assert [(b.fold, b.epoch) for b in fit_bands([*runs, short]).epochs] == [(0, 0)]


def test_a_run_of_one_fold_counts_only_for_that_fold_so_a_sweep_folder_fits_each_fold(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    for seed, c51 in enumerate([1.0, 3.0]):
        for fold in (0, 1):
            run = write_run(sweep / f"seed{seed}_fold{fold}", [line(fold, 0, c51 + fold, sharpe=0.1)])
            (run / "config.toml").write_text(f"[folds]\nn_folds = 2\nonly = {fold}\n", encoding="utf-8")
    (sweep / "logs").mkdir()  # a sweep's trial logs: not a run
    bands = fit_bands(run_directories([sweep]))
    assert [(b.fold, b.epoch) for b in bands.epochs] == [(0, 0), (1, 0)]
    assert bands.at(0, 0).mean["losses.c51"] == pytest.approx(2.0)  # seeds 0 and 1 of fold 0: 1.0 and 3.0
    assert bands.at(1, 0).mean["losses.c51"] == pytest.approx(3.0)  # of fold 1: 2.0 and 4.0
    with pytest.raises(FoxhuntError, match=r"share no \(fold, epoch\).*at least two runs of each fold"):
        fit_bands([sweep / "seed0_fold0", sweep / "seed0_fold1"])  # one run per fold: no spread to measure


def test_metrics_chooses_names_or_whole_sections(tmp_path: Path) -> None:
    bands = fit_bands(three_runs(tmp_path), metrics=["validation", "adaptive.gamma.branch"])
    assert bands.metrics == ["validation.sharpe", "adaptive.gamma.branch[0]", "adaptive.gamma.branch[1]"]
    with pytest.raises(FoxhuntError, match=r"seed0/metrics.jsonl: no metric 'losses.iqn' \(--metrics\)"):
        fit_bands(three_runs(tmp_path / "again"), metrics=["losses.iqn"])


def test_a_sweep_folder_stands_for_its_runs(tmp_path: Path) -> None:
    runs = three_runs(tmp_path / "sweep")
    (tmp_path / "sweep" / "notes").mkdir()  # not a run: left out
    assert run_directories([tmp_path / "sweep"]) == runs
    assert run_directories([runs[0], tmp_path / "sweep"]) == [runs[0], *runs]
    with pytest.raises(FoxhuntError, match=r"notes: neither a run directory \(no metrics.jsonl\) nor a folder"):
        run_directories([tmp_path / "sweep" / "notes"])


def test_runs_that_cannot_be_fitted_are_one_error_naming_the_file_and_line(tmp_path: Path) -> None:
    good = write_run(tmp_path / "good", [line(0, 0, 1.0, 0.1), line(0, 1, 1.0, 0.1)])
    with pytest.raises(FoxhuntError, match="at least two runs"):
        fit_bands([good])
    other = write_run(tmp_path / "other", [line(0, 0, 1.0, 0.1), {**line(0, 1, 1.0, 0.1), "losses": {"mse": 1.0}}])
    with pytest.raises(FoxhuntError, match=r"other/metrics.jsonl: line 2: no metric losses.c51; the runs of one"):
        fit_bands([good, other])
    nan = write_run(tmp_path / "nan", [line(0, 0, math.nan, 0.1)])
    with pytest.raises(FoxhuntError, match=r"nan/metrics.jsonl: line 1: not finite: losses.c51, "):
        fit_bands([good, nan])
    twice = write_run(tmp_path / "twice", [line(0, 0, 1.0, 0.1), line(0, 0, 1.0, 0.1)])
    with pytest.raises(FoxhuntError, match=r"twice/metrics.jsonl: line 2: fold 0, epoch 0 appears twice"):
        fit_bands([good, twice])


def test_the_file_is_toml_with_its_version_and_metrics_and_loads_back(tmp_path: Path) -> None:
    bands = fit_bands(three_runs(tmp_path), k=2.5, patience=3)
    path = write_bands(tmp_path / "bands.toml", bands)
    text = path.read_text(encoding="utf-8")
    assert f"version = {BANDS_VERSION}\n" in text and "patience = 3\n" in text and '"validation.sharpe",' in text
    assert load_bands(path) == bands


def edited(tmp_path: Path, change) -> Path:
    import tomllib

    path = write_bands(tmp_path / "bands.toml", fit_bands(three_runs(tmp_path / "runs")))
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(version=99), r"bands.toml: version: 'version' must be in \(1,\)"),
    (lambda d: d.update(k=0), r"bands.toml: k: 'k' must be a positive finite number"),
    (lambda d: d.update(patience=0), r"bands.toml: patience: 'patience' must be >= 1"),
    (lambda d: d.pop("metrics"), r"bands.toml: metrics: missing required key"),
    (lambda d: d["epochs"][1]["mean"].pop("losses.c51"),
     r"bands.toml: epochs\[1\] \(fold 0, epoch 1\).mean: its metrics differ from the file's `metrics` list "
     r"\(missing: losses.c51"),
    (lambda d: d["epochs"][0]["sigma"].update({"losses.c51": -1.0}), r"epochs\[0\] \(fold 0, epoch 0\).sigma: "
                                                                      r"losses.c51 is negative"),
    (lambda d: d["epochs"].append(d["epochs"][0]), r"bands.toml: epochs: one \(fold, epoch\) appears twice"),
    (lambda d: d.update(colour="red"), r"bands.toml: colour: unknown key"),
])
def test_a_bad_bands_file_is_one_config_error_naming_the_file_and_key(tmp_path: Path, change, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_bands(edited(tmp_path, change))


def test_a_missing_bands_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere.toml: no such bands file \(run.bands, --bands\)"):
        load_bands(tmp_path / "nowhere.toml")
