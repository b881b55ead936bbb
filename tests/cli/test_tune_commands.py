"""``foxhunt tune`` end to end, in-process: a tiny study started, shown, resumed; mistakes refused with one error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import trainer_testkit as kit

SPACE = """
[space."learner.lr"]
type = "float"
low = 1e-4
high = 3e-3
log = true

[space."learner.n_step"]
type = "int"
low = 1
high = 4
"""


pytestmark = pytest.mark.usefixtures("_private_feature_cache")  # tests/cli/conftest.py


def space_file(tmp_path: Path, text: str = SPACE) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(text, encoding="utf-8")
    return path


def tune_args(study_dir: Path, *extra: str, data: str = kit.TINY_DATA) -> list[str]:
    return ["tune", "--study", "tiny", "--dir", str(study_dir), "--data", data, *kit.set_args(kit.TINY),
            "--device", "cpu", *extra]


def test_help_teaches_with_an_example(run) -> None:
    result = run("tune", "--help")
    assert result.exit_code == 0
    for text in ('[space."learner.lr"]', "foxhunt tune --study lr --space space.toml", "--show", "validation",
                 "--storage", "docs/tune.md"):
        assert text in result.output


def test_the_command_line_starts_without_importing_optuna() -> None:
    code = "import sys, foxhunt.cli.main; assert 'optuna' not in sys.modules, 'optuna imported eagerly'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_study_is_run_shown_and_resumed(run, tmp_path: Path) -> None:
    study_dir = tmp_path / "study"
    result = run(*tune_args(study_dir, "--space", str(space_file(tmp_path)), "--trials", "2", "--seed", "3"))
    assert result.exit_code == 0, result.output + result.stderr
    assert "maximize validation sharpe" in result.output
    assert "trial 0 complete" in result.output and "trial 1 " in result.output
    assert "best: trial" in result.output and "--set learner.lr=" in result.output
    assert (study_dir / "study.db").is_file() and (study_dir / "trial_0001" / "trial.json").is_file()

    shown = run("tune", "--study", "tiny", "--dir", str(study_dir), "--show")
    assert shown.exit_code == 0, shown.output + shown.stderr
    assert "learner.lr" in shown.output and "learner.n_step" in shown.output
    assert str(study_dir / "trial_0000") in shown.output and str(study_dir / "trial_0001") in shown.output

    resumed = run("tune", "--study", "tiny", "--dir", str(study_dir), "--trials", "1", "--device", "cpu")
    assert resumed.exit_code == 0, resumed.output + resumed.stderr
    assert "study tiny: 3 trials" in resumed.output
    assert (study_dir / "trial_0002" / "trial.json").is_file()


def test_resuming_with_another_base_config_is_refused_with_the_differences(run, tmp_path: Path) -> None:
    study_dir = tmp_path / "study"
    first = run(*tune_args(study_dir, "--space", str(space_file(tmp_path)), "--trials", "1"))
    assert first.exit_code == 0, first.output + first.stderr
    result = run(*tune_args(study_dir, "--set", "learner.gamma=0.9", "--trials", "1"))
    assert result.exit_code == 2
    assert "another base config" in result.stderr and "learner.gamma: 0.99 in the study, 0.9 now" in result.stderr


def test_a_bad_space_file_is_one_error_naming_file_and_key(run, tmp_path: Path) -> None:
    path = space_file(tmp_path, '[space."learner.lr"]\ntype = "float"\nlow = 1e-3\nhigh = 1e-5\n')
    result = run(*tune_args(tmp_path / "study", "--space", str(path)))
    assert result.exit_code == 2
    assert f"{path}: space['learner.lr'].high: 'high' must be at least low" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_a_space_key_that_is_not_a_config_key_is_refused_before_any_trial(run, tmp_path: Path) -> None:
    path = space_file(tmp_path, '[space."learner.lrr"]\ntype = "float"\nlow = 1e-5\nhigh = 1e-3\n')
    result = run(*tune_args(tmp_path / "study", "--space", str(path)))
    assert result.exit_code == 2
    assert f"{path}: space['learner.lrr']: learner.lrr is not a config key" in result.stderr
    assert not list((tmp_path / "study").glob("trial_*"))


def test_a_new_study_without_a_space_is_refused(run, tmp_path: Path) -> None:
    result = run(*tune_args(tmp_path / "study"))
    assert result.exit_code == 2
    assert "does not exist yet" in result.stderr and "--space FILE" in result.stderr


def test_show_reads_only_and_names_a_missing_study(run, tmp_path: Path) -> None:
    result = run("tune", "--study", "nope", "--dir", str(tmp_path / "nowhere"), "--show")
    assert result.exit_code == 2
    assert "no study database" in result.stderr
    result = run("tune", "--study", "nope", "--dir", str(tmp_path), "--show", "--space", "s.toml")
    assert result.exit_code == 2
    assert "--show only reads a study" in result.stderr


def test_a_session_whose_every_trial_failed_is_an_error(run, tmp_path: Path) -> None:
    result = run(*tune_args(tmp_path / "study", "--space", str(space_file(tmp_path)), "--trials", "2",
                            data=str(tmp_path / "missing.csv")))
    assert result.exit_code == 2
    assert "trial 0 failed: " in result.output and "trial 1 failed: " in result.output
    assert "every trial of this session failed" in result.stderr and "missing.csv" in result.stderr


def test_repeated_data_trains_every_trial_on_each_source(run, tmp_path: Path) -> None:
    study_dir = tmp_path / "study"
    other = "synthetic:planted?bars=800&seed=4"
    result = run("tune", "--study", "suite", "--dir", str(study_dir), "--data", kit.TINY_DATA, "--data", other,
                 *kit.set_args(kit.TINY), "--device", "cpu", "--space", str(space_file(tmp_path)), "--trials", "1")
    assert result.exit_code == 0, result.output + result.stderr
    assert "each trial trains on 2 data sources in turn" in result.output
    assert "each data source's mean" in result.output
    for index in range(2):
        assert (study_dir / "trial_0000" / f"data_{index}" / "summary.json").is_file()
    shown = run("tune", "--study", "suite", "--dir", str(study_dir), "--show")
    assert shown.exit_code == 0, shown.output + shown.stderr
    assert other in shown.output.replace("\n", "")
