"""`foxhunt sweep` on the local executor: real tiny trials, each its own process and its own fold.

Each trial is the tiny trainer-test run cut to one epoch of one fold; a trial process takes a few seconds once
the kernel cache is warm (the ``warm_cache`` fixture).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
import trainer_testkit as kit
from sweep_testkit import SWEEP_TINY, kill_when_started


def sweep_args(out: Path, spec: Path, *extra: str) -> list[str]:
    return ["sweep", *kit.set_args(SWEEP_TINY), "--spec", str(spec), "--out", str(out), "--no-progress", *extra]


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_each_trial_is_a_run_of_its_own_fold_and_the_pages_link_both_ways(tmp_path: Path, warm_cache: Path) -> None:
    spec = tmp_path / "sweep.toml"
    spec.write_text("seeds = 1\nfolds = [1, 2]\n", encoding="utf-8")
    out = tmp_path / "sweep"
    result = kit.invoke(*sweep_args(out, spec, "--workers", "2"))
    assert result.exit_code == 0, result.output + result.stderr
    data = read_json(out / "sweep.json")
    assert data["counts"] == {"complete": 2, "failed": 0, "missing": 0}
    summaries = {fold: kit.read_summary(out / f"seed0_fold{fold}") for fold in (1, 2)}
    for fold, summary in summaries.items():
        assert [f["fold"] for f in summary["folds"]] == [fold]  # folds.only: this fold, trained and tested
        rows = (out / f"seed0_fold{fold}" / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(row)["fold"] for row in rows] == [fold]
    # the folds stay where the whole walk-forward puts them: fold 2's test window follows fold 1's
    assert summaries[2]["folds"][0]["test_window"][0] == summaries[1]["folds"][0]["test_window"][1]
    sharpe = data["variants"][0]["metrics"]["sharpe"]
    agents = [s["overall"]["agent"]["sharpe"] for s in summaries.values()]
    holds = [s["overall"]["buy_and_hold"]["sharpe"] for s in summaries.values()]
    assert sharpe["agent"]["mean"] == sum(agents) / 2
    assert sharpe["minus_buy_and_hold"]["mean"] == pytest.approx((agents[0] - holds[0] + agents[1] - holds[1]) / 2,
                                                                 rel=1e-12, abs=1e-12)
    page = (out / "sweep.html").read_text(encoding="utf-8")
    assert "href='seed0_fold1/report.html'" in page and "href='seed0_fold2/report.html'" in page
    report = (out / "seed0_fold1" / "report.html").read_text(encoding="utf-8")
    assert "href='../sweep.html'" in report and "seed 0, fold 1" in report
    assert "report:" in result.output and "1 failed" not in result.output


def test_a_failed_trial_is_recorded_and_a_retry_runs_only_failed_and_missing_trials(tmp_path: Path,
                                                                                     warm_cache: Path) -> None:
    spec = tmp_path / "sweep.toml"
    missing = tmp_path / "no-such-prices.csv"
    spec.write_text(f'seeds = 1\nfolds = [0, 1]\n[grid]\n"data.source" = ["{kit.TINY_DATA}", "{missing}"]\n',
                    encoding="utf-8")
    out = tmp_path / "sweep"
    result = kit.invoke(*sweep_args(out, spec, "--no-reports"))
    assert result.exit_code == 3, result.output + result.stderr  # some trials failed: --retry continues
    assert "foxhunt sweep --retry" in result.output
    data = read_json(out / "sweep.json")
    states = {t["name"]: t for t in data["trials"]}
    assert [states[f"v0_seed0_fold{k}"]["state"] for k in (0, 1)] == ["complete", "complete"]
    failed = states["v1_seed0_fold0"]
    assert failed["state"] == "failed" and failed["exit_code"] == 2
    assert failed["reason"].startswith("exit code 2: refused by foxhunt: ") and "no-such-prices.csv" in failed["reason"]
    assert data["variants"][1]["complete"] == 0 and data["variants"][1]["metrics"]["sharpe"]["agent"] == {"n": 0}
    assert not (out / "v0_seed0_fold0" / "report.html").exists()  # --no-reports
    kept = (out / "v0_seed0_fold0" / "summary.json").stat().st_mtime_ns
    (out / "v0_seed0_fold1" / "summary.json").unlink()  # a trial whose result was lost: missing
    result = kit.invoke("sweep", "--retry", str(out), "--no-progress")
    assert result.exit_code == 3, result.output + result.stderr
    assert "3 to run" in result.output  # the lost trial and the two failed ones, not the complete one
    data = read_json(out / "sweep.json")
    assert data["counts"] == {"complete": 2, "failed": 2, "missing": 0}
    assert (out / "v0_seed0_fold0" / "summary.json").stat().st_mtime_ns == kept
    assert (out / "v0_seed0_fold1" / "summary.json").is_file()
    assert "pip install" not in result.output


def test_retry_refuses_options_that_would_change_the_plan(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    result = kit.invoke("sweep", "--retry", str(tmp_path / "s"), "--seeds", "2")
    assert result.exit_code == 2 and "--retry continues a sweep with its own plan" in result.stderr


def test_a_missing_ray_is_refused_before_the_sweep_directory_is_written(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError, as without the extra
    result = kit.invoke("sweep", *kit.set_args(SWEEP_TINY), "--out", str(tmp_path / "s"), "--executor", "ray")
    assert result.exit_code == 2 and "pip install 'foxhunt[sweep]'" in result.stderr
    assert not (tmp_path / "s").exists()
    result = kit.invoke("sweep", "--out", str(tmp_path / "s"), "--ray-address", "10.0.0.1:6379")
    assert result.exit_code == 2 and "--ray-address is for --executor ray" in result.stderr
    assert not (tmp_path / "s").exists()
    result = kit.invoke("sweep", "--out", str(tmp_path / "s"), "--executor", "ray", "--ray-address", "auto",
                        "--workers", "4")
    assert result.exit_code == 2 and "--workers sizes the local Ray cluster" in result.stderr
    assert not (tmp_path / "s").exists()


def test_a_killed_local_trial_is_recorded_with_its_signal_and_a_retry_completes_it(tmp_path: Path,
                                                                                  warm_cache: Path) -> None:
    spec = tmp_path / "sweep.toml"
    spec.write_text("seeds = 1\nfolds = [0]\n", encoding="utf-8")
    out = tmp_path / "sweep"
    killer = threading.Thread(target=kill_when_started, args=(out / "seed0_fold0", {}))
    killer.start()
    result = kit.invoke(*sweep_args(out, spec, "--no-reports"))
    killer.join()
    assert result.exit_code == 3, result.output + result.stderr
    trial = read_json(out / "sweep.json")["trials"][0]
    assert (trial["state"], trial["signal"]) == ("failed", "SIGKILL")
    result = kit.invoke("sweep", "--retry", str(out), "--no-progress")
    assert result.exit_code == 0, result.output + result.stderr
    assert read_json(out / "sweep.json")["counts"] == {"complete": 1, "failed": 0, "missing": 0}
