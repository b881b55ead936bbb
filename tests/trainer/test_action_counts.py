"""The action histogram that metrics.jsonl reports counts exactly the actions the trainer took."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from trainer_testkit import TINY, TINY_DATA

from foxhunt.actions import branch_sizes
from foxhunt.config import load_config
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def test_action_counts_are_the_histogram_of_the_actions_taken(tmp_path: Path) -> None:
    config = load_config(None, [*TINY, f'data.source="{TINY_DATA}"', 'run.device="cpu"', "env.n_envs=16"])
    trainer = Trainer(config, RunDirectory(tmp_path / "run"), show_progress=False)
    trainer._build()
    trainer._start_fold(trainer.data.folds[0])
    generator = torch.Generator().manual_seed(0)
    taken = []
    for _ in range(25):  # ε is 1 at the start of a fold: every branch's actions are spread over its bins
        obs = torch.randn(trainer.env.obs.shape, generator=generator)
        taken.append(trainer._act(obs).clone())
    actions = torch.cat(taken).numpy()
    counts = trainer.action_counts.numpy()
    offset = 0
    for branch, size in enumerate(branch_sizes()):
        expected = np.bincount(actions[:, branch], minlength=size)
        assert counts[offset : offset + size].tolist() == expected.tolist()
        assert (expected > 0).sum() > 1  # the check would see a count put in the wrong bin
        offset += size
    assert offset == len(counts)
