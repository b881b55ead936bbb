"""Baseline files: what ``--save-baseline`` writes loads back the same; anything else is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from foxhunt.errors import FoxhuntError
from foxhunt.profiling import PhaseProfile, PhaseTime, load_profile, machine_info, save_profile


def test_a_saved_profile_loads_back(tmp_path: Path) -> None:
    profile = PhaseProfile({"collect": PhaseTime(10, 0.5), "update": PhaseTime(20, 2.0)},
                           machine_info(torch.device("cpu")), {"steps": 10})
    path = tmp_path / "nested" / "baseline.json"
    save_profile(path, profile)
    loaded = load_profile(path)
    assert loaded == profile
    assert loaded.phases["update"].per_call == pytest.approx(0.1)
    assert json.loads(path.read_text())["phases"]["collect"]["per_call_seconds"] == pytest.approx(0.05)


def test_the_machine_is_recorded() -> None:
    info = machine_info(torch.device("cpu"))
    assert info["device"] == "cpu" and info["torch"] == torch.__version__ and info["cpu_count"] >= 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ('{"phases": {}}', "format 1"),
        ('{"foxhunt_profile": 1, "phases": []}', "'phases' key"),
        ('{"foxhunt_profile": 1, "phases": {"collect": {"calls": 3}}}', "phase 'collect'"),
        ('{"foxhunt_profile": 1, "phases": {"collect": {"calls": 3, "seconds": -1}}}', "phase 'collect'"),
    ],
)
def test_a_file_that_is_not_a_baseline_is_refused_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(text)
    with pytest.raises(FoxhuntError, match=message) as caught:
        load_profile(path)
    assert str(path) in str(caught.value)


def test_a_missing_file_says_how_to_record_one(tmp_path: Path) -> None:
    with pytest.raises(FoxhuntError, match="--save-baseline"):
        load_profile(tmp_path / "absent.json")
