"""``[train]``: how long a run trains and how it picks its checkpoints."""

from __future__ import annotations

import attrs

__all__ = ["TrainConfig", "VALIDATION_METRICS"]

# Metrics a fold's best epoch can be chosen by (higher is better for all but max_drawdown).
VALIDATION_METRICS = ("sharpe", "sortino", "net_pnl", "calmar", "max_drawdown")

_positive = attrs.validators.gt(0)


@attrs.frozen
class TrainConfig:
    """Per fold: ``epochs`` epochs of ``steps_per_epoch`` vector-env steps each.

    After ``warmup_steps`` steps of a fold, every env step is followed by
    ``updates_per_step`` learner updates. Each epoch ends with a greedy backtest
    on the fold's validation window; the epoch with the best
    ``validation_metric`` is the fold's checkpoint and result.
    """

    epochs: int = attrs.field(default=4, validator=_positive)
    steps_per_epoch: int = attrs.field(default=200, validator=_positive)
    updates_per_step: int = attrs.field(default=1, validator=attrs.validators.ge(0))
    warmup_steps: int = attrs.field(default=32, validator=attrs.validators.ge(0))
    validation_metric: str = attrs.field(default="sharpe", validator=attrs.validators.in_(VALIDATION_METRICS))
    exploration: str = attrs.field(default="epsilon", validator=attrs.validators.in_(("epsilon", "boltzmann")))
    temperature: float = attrs.field(default=0.1, validator=_positive)  # Boltzmann exploration only
    out_dir: str = "runs"
