"""A NaN in training stops the run at the epoch boundary and names where it came from (issue 14, part 4).

The NaN comes from a real third-party plugin (a distribution on ``sys.path``): a loss component that turns NaN
after a set number of calls, in the second epoch of the first fold.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from trainer_testkit import TINY, TINY_DATA, set_args

from foxhunt.faults import FaultFlag

# Calls of the loss in fold 0's first epoch: one when the learner groups components by reach, then one per
# update (TINY: 12 updates an epoch). Call 16 is the fourth update of the second epoch.
NAN_AFTER_CALLS = 15
NAN_PLUGIN = f'''
"""A loss component that turns NaN after {NAN_AFTER_CALLS} calls."""
from foxhunt import LossComponent, hookimpl

calls = [0]


def loss(inputs):
    calls[0] += 1
    value = (inputs.taken(inputs.online.q) ** 2).mean()
    return value * float("nan") if calls[0] > {NAN_AFTER_CALLS} else value


@hookimpl
def foxhunt_loss_components(config):
    return [LossComponent("nanafter", 0.15, loss, "squared Q, then NaN")]
'''
SOURCE = "loss component nanafter: loss value"


def test_a_nan_loss_stops_the_run_naming_the_component(run, site: Path, dists, tmp_path: Path) -> None:
    dists.write_distribution(site, "foxhunt-nanafter", "0.1.0", {"nanafter": ("nanafter_plugin", NAN_PLUGIN)})
    out = tmp_path / "run"
    result = run("train", "--data", TINY_DATA, "--out", str(out), "--no-progress", *set_args(TINY),
                 "--set", 'plugins.disable=["mse"]', "--set", "learner.budgets.nanafter=0.15")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "fold 0, epoch 1" in result.stderr and SOURCE in result.stderr
    assert "the checkpoints of the last good epoch are kept" in " ".join(result.stderr.split())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["fault"]["source"] == SOURCE
    assert (summary["fault"]["fold"], summary["fault"]["epoch"], summary["fault"]["burn_in"]) == (0, 1, False)
    assert summary["folds"] == []  # no fold finished before the fault
    assert SOURCE in (out / "report.html").read_text()
    # the last good epoch's checkpoints stay: epoch 0's resume checkpoint and fold 0's best policy
    metadata = json.loads((out / "checkpoints" / "resume" / "metadata.json").read_text())
    assert metadata["position"]["epoch"] == 1
    assert (out / "checkpoints" / "fold_0" / "tensors.safetensors").is_file()
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1
    # a stopped-by-fault run is finished: it is never resumed
    again = run("train", "--resume", str(out), "--no-progress")
    assert again.exit_code == 2 and "Traceback" not in again.output


def test_a_nan_in_the_burn_in_is_named_as_a_burn_in_epoch(run, site: Path, dists, tmp_path: Path) -> None:
    # two burn-in epochs before the fold's own: call 16, the fourth update of the second epoch, is in the burn-in
    dists.write_distribution(site, "foxhunt-nanafter", "0.1.0", {"nanafter": ("nanafter_plugin", NAN_PLUGIN)})
    out = tmp_path / "run"
    result = run("train", "--data", TINY_DATA, "--out", str(out), "--no-progress", *set_args(TINY),
                 "--set", 'plugins.disable=["mse"]', "--set", "learner.budgets.nanafter=0.15",
                 "--set", "train.burn_in_epochs=2")
    assert result.exit_code == 2, result.output
    assert "fold 0, burn-in epoch 1" in result.stderr and SOURCE in result.stderr
    assert "no epoch had finished, so no checkpoint was written" in " ".join(result.stderr.split())
    assert not (out / "checkpoints" / "resume").exists()
    fault = json.loads((out / "summary.json").read_text())["fault"]
    assert (fault["fold"], fault["epoch"], fault["burn_in"]) == (0, 1, True)
    assert "in fold 0, burn-in epoch 1" in (out / "report.html").read_text()
    assert not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text().strip()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_flag_keeps_the_first_fault_and_the_first_bad_element(dtype: torch.dtype) -> None:
    flag = FaultFlag("cpu")
    losses = flag.sources(["a", "b", "c"])
    isv = flag.sources(["slot x", "slot y"])
    flag.check(losses, torch.tensor([1.0, 2.0, 3.0], dtype=dtype))
    flag.check(isv, torch.tensor([0.0, -1e30], dtype=dtype))
    assert flag.first() is None
    flag.check(isv, torch.tensor([0.0, float("inf")], dtype=dtype))
    assert flag.first() == "slot y"
    flag.check(losses, torch.tensor([float("nan"), float("nan"), 0.0], dtype=dtype))
    assert flag.first() == "slot y"  # later faults never overwrite the first
    flag.clear()
    flag.check(losses, torch.tensor([0.0, float("nan"), float("-inf")], dtype=dtype))
    assert flag.first() == "b"  # within one check, the first bad element
