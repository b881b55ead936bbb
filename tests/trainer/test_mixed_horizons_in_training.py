"""`[learner] n_step_mix` inside `foxhunt train`: a run that mixes two return horizons trains to the end, and a mix
that is not shorter than `n_step` is refused before the run starts, naming both keys."""

from __future__ import annotations

from pathlib import Path

import torch
from trainer_testkit import TINY, TINY_DATA, invoke, train_args

from foxhunt.config import load_config
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def test_a_run_with_mixed_horizons_trains_on_both(tmp_path: Path, _private_feature_cache: Path) -> None:
    overrides = [f'data.source="{TINY_DATA}"', *TINY, "folds.n_folds=1", "train.epochs=1",
                 "learner.n_step=5", "learner.n_step_mix=2"]
    trainer = Trainer(load_config(None, overrides), RunDirectory(tmp_path / "run"), show_progress=False)
    trainer.run()
    assert (tmp_path / "run" / "summary.json").exists()
    replay = trainer.learner.replay
    assert replay.n_step == 5 and replay.n_step_mix == 2
    assert int(trainer.learner.updates) > 0
    assert set(replay.horizons(replay.uniforms(512)).unique().tolist()) == {2, 5}
    assert all(torch.isfinite(p).all() for p in trainer.learner.params)


def test_a_mix_as_long_as_n_step_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke(*train_args(out, (*TINY, "learner.n_step=3", "learner.n_step_mix=3")))
    assert result.exit_code != 0
    assert "learner.n_step_mix" in result.output and "learner.n_step" in result.output
    assert not (out / "summary.json").exists()
