"""A trial's outcome from its process's exit status; importing foxhunt never imports Ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from foxhunt.errors import FoxhuntError
from foxhunt.sweep.outcome import process_outcome
from foxhunt.sweep.ray_cluster import import_ray


def test_a_killed_process_is_failed_with_its_signal(tmp_path: Path) -> None:
    outcome = process_outcome(-9, tmp_path, tmp_path / "none.log", 1.5)
    assert (outcome.state, outcome.signal, outcome.exit_code) == ("failed", "SIGKILL", None)
    assert outcome.reason.startswith("killed by signal SIGKILL")


def test_an_exit_code_is_failed_with_the_last_error_line_of_its_log(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text('{"event": "fold"}\nerror: the data has 10 bars but 3 fold(s) need at least 700\n')
    outcome = process_outcome(2, tmp_path, log, 1.0)
    assert outcome.exit_code == 2
    assert outcome.reason == "exit code 2: refused by foxhunt: the data has 10 bars but 3 fold(s) need at least 700"


def test_exit_zero_counts_only_with_a_summary(tmp_path: Path) -> None:
    assert process_outcome(0, tmp_path, tmp_path / "t.log", 1.0).state == "failed"
    (tmp_path / "summary.json").write_text("{}")
    assert process_outcome(0, tmp_path, tmp_path / "t.log", 1.0).state == "complete"


def test_importing_foxhunt_and_its_cli_does_not_import_ray() -> None:
    code = "import sys, foxhunt, foxhunt.sweep, foxhunt.cli.main; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_ray_is_one_paragraph_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(FoxhuntError, match=r"pip install 'foxhunt\[sweep\]'"):
        import_ray()
