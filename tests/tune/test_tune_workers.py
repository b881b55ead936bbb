"""``foxhunt tune --workers 2``: two workers share one study and its SQLite storage, as processes or on Ray.

Each test runs a real tiny study through the CLI: 3 trials of the trainer tests' tiny config, shared by two
workers (2 + 1), which must add exactly 3 trials, each an ordinary run directory, with no "database is
locked" failure, and report the best. The kernels are compiled once into the session's private cache
(``warm_cache``), so a worker process or Ray worker only loads them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numba
import optuna
import pytest
import structlog
import torch

from foxhunt.tune import study as study_module
from foxhunt.tune.study import default_storage, load_study
from foxhunt.tune.worker import SEED_STRIDE, WorkerJob, configure_worker_logging, run_worker
from foxhunt.tune.workers import shares, worker_jobs

SPACE = """
[space."learner.lr"]
type = "float"
low = 1e-4
high = 3e-3
log = true

[space."learner.hidden"]
type = "categorical"
choices = [[16, 16], [32, 32]]
"""  # the default pruner waits for 5 complete trials: none of 3 is pruned
TRIALS = 3


@pytest.mark.parametrize(("trials", "workers", "expected"), [(3, 2, [2, 1]), (4, 2, [2, 2]), (2, 5, [1, 1]),
                                                             (10, 3, [4, 3, 3]), (1, 1, [1])])
def test_the_trials_are_split_exactly(trials: int, workers: int, expected: list[int]) -> None:
    assert shares(trials, workers) == expected
    jobs = worker_jobs("s", Path("d"), "sqlite:///d/study.db", trials=trials, workers=workers, seed=4)
    assert [job.trials for job in jobs] == expected and [job.index for job in jobs] == list(range(len(expected)))
    assert "--index" in jobs[-1].command() and jobs[-1].command()[jobs[-1].command().index("--seed") + 1] == "4"


def test_a_worker_logs_warnings_only_unless_tune_was_asked_for_debug(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = worker_jobs("s", Path("d"), "sqlite:///d/study.db", trials=2, workers=2)
    loud = worker_jobs("s", Path("d"), "sqlite:///d/study.db", trials=2, workers=2, log_level="debug")
    assert all(job.command()[-2:] == ["--log-level", "warning"] for job in quiet)
    assert all(job.command()[-2:] == ["--log-level", "debug"] for job in loud)
    try:
        configure_worker_logging(quiet[0])
        log = structlog.get_logger("a.trial")
        log.info("fold boundary", reset=28)
        log.warning("backtest_margin_call", calls=2)
        err = capsys.readouterr().err
        assert "backtest_margin_call" in err and "fold boundary" not in err
        configure_worker_logging(loud[0])
        log.debug("plugins frozen")
        assert "plugins frozen" in capsys.readouterr().err
    finally:
        structlog.reset_defaults()


def test_each_worker_seeds_its_own_sampler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Workers that open the study together see the same stored-trial count, the seed's only other offset:
    # without a seed of their own they would draw the same first trials.
    seen = {}
    monkeypatch.setattr(study_module, "prepare_study", lambda name, directory, storage: "spec")
    monkeypatch.setattr(study_module, "run_trials", lambda spec, **kwargs: seen.update(kwargs))
    threads = torch.get_num_threads(), numba.get_num_threads()
    try:
        job = WorkerJob("s", tmp_path, "sqlite:///x.db", trials=2, index=3, threads=1, seed=4, device="cpu")
        assert run_worker(job) == 0
    finally:
        torch.set_num_threads(threads[0])
        numba.set_num_threads(threads[1])
    assert seen["seed"] == 4 + 3 * SEED_STRIDE and seen["trials"] == 2 and seen["device"] == "cpu"


def run_tune(kit: ModuleType, tmp_path: Path, *extra: str):
    space = tmp_path / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    directory = tmp_path / "study"
    result = kit.invoke("tune", "--study", "par", "--space", str(space), "--dir", str(directory),
                        "--trials", str(TRIALS), "--device", "cpu", "--data", kit.TINY_DATA,
                        *kit.set_args(kit.TINY), "--workers", "2", *extra)
    return result, directory


def check_study(result, directory: Path) -> None:
    assert result.exit_code == 0, result.output + result.stderr
    assert "2 workers on" in result.output and "trials 2, 1" in result.output
    study = load_study("par", default_storage(directory))
    assert [t.number for t in study.trials] == list(range(TRIALS))
    assert all(t.state is optuna.trial.TrialState.COMPLETE for t in study.trials), [t.user_attrs for t in study.trials]
    for trial in study.trials:
        run_dir = directory / f"trial_{trial.number:04d}"
        assert Path(trial.user_attrs["run_dir"]) == run_dir
        assert (run_dir / "summary.json").is_file()
        assert json.loads((run_dir / "trial.json").read_text())["state"] == "complete"
    # no two trials drew the same values (test_each_worker_seeds_its_own_sampler checks the seeds themselves)
    assert len({t.params["learner.lr"] for t in study.trials}) == TRIALS
    best = study.best_trial
    assert f"best: trial {best.number}, sharpe {best.value:+.4f}" in result.output


def test_two_local_worker_processes_share_the_trials(tmp_path: Path, testkit: ModuleType, warm_cache: Path,
                                                    capfd: pytest.CaptureFixture[str]) -> None:
    result, directory = run_tune(testkit, tmp_path)
    check_study(result, directory)
    # the worker processes write to this process's descriptors: one line per trial, and no training's info lines
    out, err = capfd.readouterr()
    assert out.count(" complete: ") == TRIALS and "fold boundary" not in err + out
    # a resume with one worker runs in this process, on the same study
    again = testkit.invoke("tune", "--study", "par", "--dir", str(directory), "--trials", "1", "--device", "cpu")
    assert again.exit_code == 0, again.output + again.stderr
    assert len(load_study("par", default_storage(directory)).trials) == TRIALS + 1


def test_two_ray_workers_share_the_trials(tmp_path: Path, testkit: ModuleType, warm_cache: Path) -> None:
    result, directory = run_tune(testkit, tmp_path, "--executor", "ray")  # a local cluster of 2 CPUs, then shut down
    check_study(result, directory)


def test_ray_address_needs_the_ray_executor(tmp_path: Path, testkit: ModuleType) -> None:
    result = testkit.invoke("tune", "--study", "x", "--dir", str(tmp_path), "--ray-address", "auto")
    assert result.exit_code == 2 and "--ray-address is for --executor ray" in result.stderr
