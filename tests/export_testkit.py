"""The fold checkpoint the export tests export: one tiny run (one fold, one epoch), trained once per session.

Both export test modules ask for it; the run is kept under pytest's session
folder, so the second module finds it there instead of training again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_testkit import TINY, invoke, train_args

from foxhunt.checkpoint_backtest import load_policy
from foxhunt.policy import Policy

ONE_EPOCH = (*TINY, "folds.n_folds=1", "train.epochs=1")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    """``checkpoints/fold_0`` of the session's tiny run."""
    run = tmp_path_factory.getbasetemp() / "export-run"
    if not (run / "summary.json").exists():
        result = invoke(*train_args(run, ONE_EPOCH))
        assert result.exit_code == 0, result.output + result.stderr
    return run / "checkpoints" / "fold_0"


@pytest.fixture(scope="module")
def averaged_checkpoint(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny run's fold checkpoint as a policy that averages two epochs ([train] policy_epochs): the best is
    the trained network, the member the same with every weight moved by noise of its own size, and its own ISV
    support, so the two act differently and the average is neither."""
    loaded = load_policy(checkpoint)
    loaded.host.close()
    layout = loaded.policy.isv.layout
    best, other = Policy.load(checkpoint, layout), Policy.load(checkpoint, layout)
    other.metadata["epoch"] = best.metadata["epoch"] + 1
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for parameter in other.network.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * parameter.std().clamp(min=1e-3))
        other.popart.mu.add_(0.5)
    directory = tmp_path_factory.mktemp("averaged") / "fold_0"
    Policy.averaging([best, other]).save(directory)
    return directory
