"""The expected_sarsa plugin: the ``sarsa.temperature`` slot it declares (whatever the target policy), its setting,
and a tiny ``foxhunt train`` that reads it through ``[learner] target_policy = "expected_sarsa"``."""

from __future__ import annotations

import importlib.metadata
import json
import unittest
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings
from safetensors.torch import load_file
from trainer_testkit import TINY, invoke, train_args

import foxhunt.learner.declarations as learner_declarations
from foxhunt.actions import Branch
from foxhunt.config import load_config
from foxhunt.contract import SARSA_TEMPERATURE_FALLBACK
from foxhunt.errors import PluginError
from foxhunt.isv import ISV
from foxhunt.plugin.host import ENTRY_POINT_GROUP, PluginHost, PluginSelection
from foxhunt.state import ResetCategory
from foxhunt.testing import conformance_machine
from foxhunt_plugins import expected_sarsa


def frozen(settings: dict | None = None):
    host = PluginHost(PluginSelection(settings=settings or {}))
    host.add_plugin(learner_declarations, "learner")
    host.add_plugin(expected_sarsa, expected_sarsa.NAME)
    host.declare()
    return host.freeze()


def test_declares_its_temperature_slot_with_the_configured_start() -> None:
    default = frozen()
    slot = default.layout.slot(expected_sarsa.TEMPERATURE)
    assert (slot.width, slot.owner, slot.init) == (len(Branch), "expected_sarsa", SARSA_TEMPERATURE_FALLBACK)
    entry = default.state.entry(expected_sarsa.TEMPERATURE)
    assert entry.category is ResetCategory.TRAINING_PERSIST
    warm = frozen({"expected_sarsa": {"temperature": 0.4}})
    assert warm.layout.fingerprint_hex == default.layout.fingerprint_hex  # the layout depends on the code alone
    torch.testing.assert_close(ISV(warm.layout).view(expected_sarsa.TEMPERATURE), torch.full((len(Branch),), 0.4))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_temperature_that_is_not_a_finite_positive_number_is_refused(bad: float) -> None:
    with pytest.raises(PluginError, match="temperature"):
        frozen({"expected_sarsa": {"temperature": bad}})


def test_it_passes_the_conformance_machine_with_expected_sarsa_targets_on() -> None:
    """Its slot and state entry through resets and checkpoints, the learner reading the slot for its targets."""
    config = load_config(None, ['learner.target_policy="expected_sarsa"', "plugins.expected_sarsa.temperature=0.3"])
    quick = settings(max_examples=4, stateful_step_count=6, deadline=None, database=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])
    case = conformance_machine(expected_sarsa, expected_sarsa.NAME, config, test_settings=quick)
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(case).run(result)
    assert [text for _, text in result.failures + result.errors] == []


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin discoverable through the entry-point group, as an install from today's pyproject lists it."""
    real = importlib.metadata.entry_points
    point = importlib.metadata.EntryPoint(expected_sarsa.NAME, expected_sarsa.__name__, ENTRY_POINT_GROUP)

    def entry_points(**selection):
        found = real(**selection)
        if selection.get("group") != ENTRY_POINT_GROUP or any(ep.name == point.name for ep in found):
            return found
        return [*found, point]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_a_tiny_run_with_expected_sarsa_targets_trains_and_keeps_its_temperature(installed, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    overrides = (*TINY, "train.epochs=1", "folds.n_folds=1", 'learner.target_policy="expected_sarsa"',
                 "plugins.expected_sarsa.temperature=0.5")
    result = invoke(*train_args(out, overrides))
    assert result.exit_code == 0, result.output + result.stderr
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert all(value == value for value in row["losses"].values())  # finite: no NaN from the target mixture
    isv = load_file(str(out / "checkpoints/fold_0/tensors.safetensors"))["isv"]
    layout = json.loads((out / "checkpoints/fold_0/metadata.json").read_text(encoding="utf-8"))["isv"]
    (slot,) = [s for s in layout["slots"] if s["name"] == expected_sarsa.TEMPERATURE]
    assert isv[slot["offset"]:slot["offset"] + slot["width"]].tolist() == [0.5] * len(Branch)
