"""``[train]``: how much a run trains, counted in env steps and learner updates, and how it picks checkpoints."""

from __future__ import annotations

import math

import attrs

__all__ = ["TrainConfig", "EpochPlan", "VALIDATION_METRICS"]

# Metrics a fold's best epoch can be chosen by (higher is better for all but max_drawdown).
VALIDATION_METRICS = ("sharpe", "sortino", "net_pnl", "calmar", "max_drawdown")

_positive = attrs.validators.gt(0)
_int64 = attrs.validators.le(2**63 - 1)  # step and update counters are int64 device tensors


@attrs.frozen
class TrainConfig:
    """Per fold: ``epochs`` epochs, each collecting ``env_steps_per_epoch`` transitions and making
    ``updates_per_epoch`` learner updates.

    Both are totals over every parallel environment, so changing ``env.n_envs``
    changes how the work is laid out (fewer, wider vector steps), not how much
    the agent sees or learns. The first ``warmup_env_steps`` transitions of a
    fold only fill the replay buffer; updates start after them. Each epoch ends
    with a greedy backtest on the fold's validation window; the epoch with the
    best ``validation_metric`` is the fold's checkpoint, which is then
    evaluated once on the fold's test window (what the run reports).
    """

    epochs: int = attrs.field(default=4, validator=[_positive, _int64])
    env_steps_per_epoch: int = attrs.field(default=12_800, validator=[_positive, _int64])
    updates_per_epoch: int = attrs.field(default=200, validator=[attrs.validators.ge(0), _int64])
    warmup_env_steps: int = attrs.field(default=2_048, validator=[attrs.validators.ge(0), _int64])
    validation_metric: str = attrs.field(default="sharpe", validator=attrs.validators.in_(VALIDATION_METRICS))
    exploration: str = attrs.field(default="epsilon", validator=attrs.validators.in_(("epsilon", "boltzmann")))
    temperature: float = attrs.field(default=0.1, validator=_positive)  # Boltzmann exploration only
    out_dir: str = "runs"

    def plan(self, n_envs: int) -> EpochPlan:
        """How an epoch's env steps and updates are laid out over vector steps of ``n_envs`` environments."""
        return EpochPlan(
            vector_steps=max(1, math.ceil(self.env_steps_per_epoch / n_envs)),
            updates=self.updates_per_epoch,
            warmup_vector_steps=math.ceil(self.warmup_env_steps / n_envs),
            n_envs=n_envs,
        )


@attrs.frozen
class EpochPlan:
    """An epoch as vector steps, with the updates spread evenly over them.

    Vector step ``i`` of the epoch is followed by ``updates_after(i)`` updates:
    the integer parts of ``(i + 1) * updates / vector_steps`` differenced, so an
    epoch makes exactly ``updates`` updates whatever the ratio (several per
    step on a GPU, one every few steps when updates are fewer than steps).
    Steps inside the fold's warm-up make none.
    """

    vector_steps: int
    updates: int
    warmup_vector_steps: int
    n_envs: int

    @property
    def env_steps(self) -> int:
        return self.vector_steps * self.n_envs

    def updates_after(self, epoch: int, step: int) -> int:
        """Updates after vector step ``step`` of epoch ``epoch`` (0 during the fold's warm-up)."""
        if epoch * self.vector_steps + step < self.warmup_vector_steps:
            return 0
        return (step + 1) * self.updates // self.vector_steps - step * self.updates // self.vector_steps
