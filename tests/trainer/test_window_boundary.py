"""A plugin's window-reset state is reset by the trainer at the start of every epoch, and nowhere else.

The plugin is a real distribution (``tests/fixtures/fake_dists.py``) found
through its entry point, like any third-party plugin. Its state counts learner
updates; kernels at the fold and epoch points record the count, and the reset
records the count it threw away, so the event log shows exactly when each
reset ran.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from trainer_testkit import invoke, train_args

_spec = importlib.util.spec_from_file_location(
    "foxhunt_test_fake_dists", Path(__file__).resolve().parents[1] / "fixtures" / "fake_dists.py"
)
fake_dists = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_dists)

MODULE = "windowcount_plugin"

WINDOW_PLUGIN = '''
"""Counts learner updates in window-reset state; its kernels log the count at fold and epoch points."""
from foxhunt import Kernel, hookimpl

BUILT = []  # every live object the trainer built from the factory


class UpdateCount:
    def __init__(self):
        self.count = 0
        self.events = []
        BUILT.append(self)

    def reset(self):
        self.events.append(("reset", self.count))
        self.count = 0


@hookimpl
def foxhunt_declare(registrar):
    registrar.state("windowcount.updates", "window-reset", reset=UpdateCount.reset, factory=UpdateCount,
                    doc="learner updates since the training window began")


def _count(context):
    BUILT[-1].count += 1


def _log(point):
    def log(context):
        BUILT[-1].events.append((point, BUILT[-1].count))
    return log


@hookimpl
def foxhunt_kernels(config, settings):
    return [
        Kernel("windowcount.count", "step", _count, "one count per learner update"),
        Kernel("windowcount.epoch", "epoch", _log("epoch"), "logs the count at each epoch's end"),
        Kernel("windowcount.fold", "fold", _log("fold"), "logs the count at each fold's start"),
    ]
'''


@pytest.fixture
def window_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site = fake_dists.write_distribution(
        tmp_path / "site", "foxhunt-windowcount", "0.1.0", {"windowcount": (MODULE, WINDOW_PLUGIN)}
    )
    fake_dists.make_visible(monkeypatch, site)
    yield
    fake_dists.forget_modules(site)


def test_window_reset_state_restarts_at_every_epoch_and_nowhere_else(tmp_path: Path, window_plugin) -> None:
    # TINY: 2 folds x 2 epochs of 12 vector steps; the fold's first 4 steps are warm-up, then one update per step
    result = invoke(*train_args(tmp_path / "run"))
    assert result.exit_code == 0, result.output + result.stderr
    (state,) = sys.modules[MODULE].BUILT
    epochs = [("epoch", 8), ("reset", 8), ("epoch", 12)]
    # before training every kernel runs once against scratch copies (the foreign-write check): this plugin's
    # counter lives outside the ISV, so it sees that run as one update and a log at each point
    dry_run = [("epoch", 1), ("fold", 1)]
    assert state.events == [*dry_run, ("fold", 1), ("reset", 1), *epochs, ("fold", 12), ("reset", 12), *epochs]
