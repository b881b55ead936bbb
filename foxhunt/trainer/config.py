"""``[train]``: how much a run trains, counted in env steps and learner updates, and how it picks checkpoints."""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["TrainConfig", "EpochPlan", "RecoveryConfig", "VALIDATION_METRICS", "MOMENT_GROUPS"]

# Metrics a fold's best epoch can be chosen by (higher is better for all but max_drawdown).
VALIDATION_METRICS = ("sharpe", "sortino", "net_pnl", "calmar", "max_drawdown")

_positive = attrs.validators.gt(0)
_int64 = attrs.validators.le(2**63 - 1)  # step and update counters are int64 device tensors
# Parameter groups whose Adam moments a plateau recovery may reset (foxhunt.trainer.recovery.moment_parameters)
MOMENT_GROUPS = ("trunk", "heads", "all")


def _moment_groups(_: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    unknown = [group for group in value if group not in MOMENT_GROUPS]
    if unknown:
        raise ValueError(f"{attribute.name}: unknown parameter group(s) {unknown}; choose from {list(MOMENT_GROUPS)}")


@attrs.frozen
class RecoveryConfig:
    """``[train.recovery]``: plateau detection and recovery per fold (off by default; not measured yet).

    A plateau is ``patience`` epochs in a row whose validation score does not beat the fold's best by
    ``min_delta`` (in the units of ``train.validation_metric``); on one, at most ``max_recoveries`` times per fold,
    the learner is rewound to the best of the last ``ring_size`` epoch checkpoints, shrunk and perturbed
    (``shrink``, ``noise``), the Adam moments of ``reset_moments`` are zeroed, and for ``boost_epochs`` epochs
    exploration is raised (``epsilon_boost`` or ``temperature_multiplier``) and the learning rate multiplied by
    ``lr_multiplier``. :mod:`foxhunt.trainer.recovery` and docs/learner.md, "Plateau recovery", say how.
    """

    enabled: bool = False
    ring_size: int = attrs.field(default=4, validator=attrs.validators.ge(1))  # K checkpoints kept per fold
    patience: int = attrs.field(default=2, validator=attrs.validators.ge(1))  # stale epochs that make a plateau
    min_delta: float = attrs.field(default=0.05, validator=attrs.validators.gt(0.0))  # in the metric's units
    max_recoveries: int = attrs.field(default=2, validator=attrs.validators.ge(1))  # per fold
    shrink: float = attrs.field(default=0.8, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)])
    noise: float = attrs.field(default=0.01, validator=attrs.validators.ge(0.0))
    epsilon_boost: float = attrs.field(default=0.1, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)])
    temperature_multiplier: float = attrs.field(default=2.0, validator=attrs.validators.ge(1.0))
    lr_multiplier: float = attrs.field(default=2.0, validator=attrs.validators.gt(0.0))
    boost_epochs: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    reset_moments: tuple[str, ...] = attrs.field(default=("all",), converter=tuple, validator=_moment_groups)


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
    evaluated once on the fold's test window (what the run reports). With
    ``policy_epochs`` K > 1 the checkpoint is the fold's K best epochs by that
    metric, acting on the mean of their expected action values
    (:mod:`foxhunt.trainer.snapshots`; all of them when the fold has K epochs or fewer).

    With ``burn_in_epochs`` B > 0 the first fold a run trains, the only one
    that starts from freshly initialised networks, is preceded by B epochs on
    its training window that are neither validated nor selectable; the fold
    then starts as every later fold does, from the networks they left, with
    the optimiser, schedules and replay reset (docs/learner.md, "The first
    fold on the GPU").

    With ``flat_fold_retries`` R > 0 a fold whose last epoch made no trade on
    its validation window (no fill: the greedy policy stays flat, the collapse
    of docs/learner.md, "The first fold on the GPU") trains its ``epochs``
    epochs again, numbered on, from the networks it has, after the fold
    boundary (optimiser, schedules and replay reset, as between folds); at most
    R times a fold. Every epoch of the fold stays selectable.
    """

    epochs: int = attrs.field(default=4, validator=[_positive, _int64])
    env_steps_per_epoch: int = attrs.field(default=12_800, validator=[_positive, _int64])
    updates_per_epoch: int = attrs.field(default=200, validator=[attrs.validators.ge(0), _int64])
    warmup_env_steps: int = attrs.field(default=2_048, validator=[attrs.validators.ge(0), _int64])
    validation_metric: str = attrs.field(default="sharpe", validator=attrs.validators.in_(VALIDATION_METRICS))
    policy_epochs: int = attrs.field(default=1, validator=_positive)  # the epochs the fold's policy averages
    burn_in_epochs: int = attrs.field(default=0, validator=[attrs.validators.ge(0), _int64])  # first fold only
    # a fold trains epochs × (1 + flat_fold_retries) epochs at most: bounded so that stays a run one can wait for
    flat_fold_retries: int = attrs.field(default=0, validator=[attrs.validators.ge(0), attrs.validators.le(1_000)])
    exploration: str = attrs.field(default="epsilon", validator=attrs.validators.in_(("epsilon", "boltzmann")))
    temperature: float = attrs.field(default=0.1, validator=_positive)  # Boltzmann exploration only
    out_dir: str = "runs"
    recovery: RecoveryConfig = RecoveryConfig()  # [train.recovery]: plateau recovery, off by default

    def fold_epochs(self, retries: int) -> int:
        """The epochs a fold trains after ``retries`` flat-fold retries: ``epochs`` once, and again per retry."""
        return self.epochs * (1 + retries)

    @property
    def most_fold_epochs(self) -> int:
        """The most epochs a fold can train (every flat-fold retry used). TensorBoard and ``foxhunt tune`` number a
        fold's epochs from ``fold × most_fold_epochs``, so no two epochs share a step."""
        return self.fold_epochs(self.flat_fold_retries)

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
