"""``foxhunt profile`` end to end on the trainer testkit's tiny CPU run, in-process.

One short profile (a few steps, one epoch boundary) writes its Chrome trace,
prints the tables, records a baseline and is compared against a baseline
far faster than any machine, so the comparison's exit code shows too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from foxhunt.cli.common import EXIT_USER_ERROR
from foxhunt.cli.profile_commands import EXIT_REGRESSED
from foxhunt.profiling import PHASES, load_profile, range_name, save_profile

import trainer_testkit as kit

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "profile_baseline_cpu.json"

pytestmark = pytest.mark.usefixtures("_private_feature_cache")  # tests/cli/conftest.py


def profile_args(*extra: str) -> list[str]:
    return ["profile", "--data", kit.TINY_DATA, *kit.set_args(kit.TINY), "--device", "cpu", "--steps", "3",
            "--warmup", "1", "--top", "5", *extra]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> tuple[Path, Any]:
    """The module's one profile: its folder (trace, saved baseline) and the CLI result."""
    folder = tmp_path_factory.mktemp("profile")
    fast = load_profile(FIXTURE)
    for phase in PHASES:  # 1000 times faster than the recorded machine: every phase now counts as a regression
        fast = fast.with_phase(phase, fast.phases[phase].scaled(1e-3))
    save_profile(folder / "fast.json", fast)
    result = kit.invoke(*profile_args("--trace", str(folder / "trace.json"), "--save-baseline",
                                      str(folder / "saved.json"), "--baseline", str(folder / "fast.json")))
    return folder, result


def test_the_chrome_trace_loads_and_holds_every_phase_range(profiled: tuple[Path, Any]) -> None:
    folder, result = profiled
    trace = json.loads((folder / "trace.json").read_text(encoding="utf-8"))
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {range_name(phase) for phase in PHASES} <= names
    assert "Traceback" not in result.output


def test_the_tables_are_printed(profiled: tuple[Path, Any]) -> None:
    _, result = profiled
    out = result.stdout
    assert "phases (wall clock" in out and "host: ops and foxhunt ranges" in out
    for phase in PHASES:
        assert phase in out
    assert "foxhunt.update" in out  # the ranges are among the ops, with their self time


def test_the_saved_baseline_records_each_phase_and_the_machine(profiled: tuple[Path, Any]) -> None:
    folder, _ = profiled
    saved = load_profile(folder / "saved.json")
    assert saved.phases["collect"].calls == 3 and saved.phases["validation"].calls == 1
    assert all(saved.phases[phase].seconds > 0 for phase in PHASES)
    assert saved.machine["device"] == "cpu" and saved.run["steps"] == 3


def test_a_regression_against_the_baseline_exits_with_its_code(profiled: tuple[Path, Any]) -> None:
    _, result = profiled
    assert result.exit_code == EXIT_REGRESSED, result.output
    assert "REGRESSED" in result.stdout and "regressed against" in result.stdout


def test_a_file_that_is_not_a_baseline_fails_before_anything_runs(tmp_path: Path) -> None:
    bad = tmp_path / "baseline.json"
    bad.write_text("{}")
    result = kit.invoke(*profile_args("--baseline", str(bad)))
    assert result.exit_code == EXIT_USER_ERROR
    assert "not a foxhunt profile baseline" in result.stderr
    assert "phases (wall clock" not in result.stdout


def test_help_documents_the_exit_codes() -> None:
    result = kit.invoke("profile", "--help")
    assert result.exit_code == 0
    assert "4 a phase regressed" in " ".join(result.stdout.split())
