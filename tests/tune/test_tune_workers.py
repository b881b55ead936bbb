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

import optuna
import pytest

from foxhunt.tune.study import default_storage, load_study
from foxhunt.tune.worker import SEED_STRIDE
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
    # trials 0 and 1 started side by side in two workers: their seeds differ (SEED_STRIDE), so do their draws
    assert len({t.params["learner.lr"] for t in study.trials}) == TRIALS
    best = study.best_trial
    assert f"best: trial {best.number}, sharpe {best.value:+.4f}" in result.output


def test_two_local_worker_processes_share_the_trials(tmp_path: Path, testkit: ModuleType, warm_cache: Path) -> None:
    result, directory = run_tune(testkit, tmp_path)
    check_study(result, directory)
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
    assert SEED_STRIDE > 10**6
