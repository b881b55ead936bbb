"""`[learner] reward_split` inside `foxhunt train`: the trainer stores each step's execution part beside its reward,
hands the replay augmentations the branches that learn from it, and a run with it trains to the end; with the
execution regret also on, the run is refused before it starts, naming the key to change."""

from __future__ import annotations

from pathlib import Path

import torch
from trainer_testkit import TINY, TINY_DATA, invoke, train_args

from foxhunt.actions import Branch, OrderType, Urgency
from foxhunt.config import load_config
from foxhunt.learner.execution_credit import EXECUTION_BRANCHES
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

SPLIT = ("learner.reward_split=true", "learner.execution_regret=false", "learner.shaping_only=true")


def test_a_run_with_the_reward_split_stores_each_steps_execution_part(
        tmp_path: Path, _private_feature_cache: Path) -> None:
    overrides = [f'data.source="{TINY_DATA}"', *TINY, "folds.n_folds=1", "train.epochs=1", *SPLIT,
                 "plugins.hindsight.enabled=true"]
    trainer = Trainer(load_config(None, overrides), RunDirectory(tmp_path / "run"), show_progress=False)
    trainer.run()
    assert (tmp_path / "run" / "summary.json").exists()
    replay = trainer.learner.replay
    stored = int(min(int(replay.written), replay.rows))
    actions = replay.actions[:stored].reshape(-1, len(Branch))
    executions = replay.executions[:stored].reshape(-1)
    # a PASSIVE market order is the reference execution: its part is zero; other executions that traded are not
    reference = (actions[:, Branch.ORDER_TYPE] == OrderType.MARKET) & (actions[:, Branch.URGENCY] == Urgency.PASSIVE)
    assert reference.any() and torch.all(executions[reference].abs() < 1e-9)
    assert (executions[~reference].abs() > 1e-6).any()
    assert torch.all(torch.isfinite(executions))
    hindsight = replay.augmentations.tensors["hindsight"]
    assert float(hindsight["split"]) == 1.0
    assert [int(b) for b in torch.nonzero(hindsight["execution_columns"])[:, 0]] == [int(b) for b in EXECUTION_BRANCHES]
    assert all(torch.isfinite(p).all() for p in trainer.learner.params)


def test_the_split_beside_the_execution_regret_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke(*train_args(out, (*TINY, "learner.reward_split=true", "learner.execution_regret=true")))
    assert result.exit_code != 0
    assert "learner.execution_regret=false" in result.output
    assert not (out / "summary.json").exists()
