"""How long a fold is, in environment transitions: what schedules measured over a fold divide by.

The epsilon plugin decays exploration over a share of the fold counted in
transitions (``train.epochs`` × the epoch's vector steps × ``env.n_envs``, as
the trainer lays them out), so the same config explores the same share of its
data whatever ``env.n_envs`` and however the fold is cut into epochs.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["FoldLength", "fold_length_of"]


@attrs.frozen
class FoldLength:
    """How long a fold is, for schedules measured in environment transitions.

    ``n_envs`` transitions per vector step; ``env_steps`` transitions per fold
    (``epochs`` × the epoch's vector steps × ``n_envs``, as the trainer lays them out).
    """

    n_envs: int
    env_steps: int


def fold_length_of(config: Any) -> FoldLength:
    """The fold length of a run config; the ``[env]`` and ``[train]`` defaults where a section is absent."""
    from foxhunt.env.config import EnvConfig
    from foxhunt.trainer.config import TrainConfig

    env = getattr(config, "env", None)
    train = getattr(config, "train", None)
    n_envs = env.n_envs if isinstance(env, EnvConfig) else EnvConfig().n_envs
    train = train if isinstance(train, TrainConfig) else TrainConfig()
    return FoldLength(n_envs=n_envs, env_steps=train.epochs * train.plan(n_envs).env_steps)
