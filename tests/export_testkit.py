"""The fold checkpoint the export tests export: one tiny run (one fold, one epoch), trained once per session.

Both export test modules ask for it; the run is kept under pytest's session
folder, so the second module finds it there instead of training again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_testkit import TINY, invoke, train_args

ONE_EPOCH = (*TINY, "folds.n_folds=1", "train.epochs=1")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    """``checkpoints/fold_0`` of the session's tiny run."""
    run = tmp_path_factory.getbasetemp() / "export-run"
    if not (run / "summary.json").exists():
        result = invoke(*train_args(run, ONE_EPOCH))
        assert result.exit_code == 0, result.output + result.stderr
    return run / "checkpoints" / "fold_0"
