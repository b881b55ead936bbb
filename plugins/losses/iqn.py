"""IQN: quantile-Huber regression of the IQN head toward the target head's quantiles (Dabney et al. 2018).

The online head is evaluated at T fractions τ drawn for this update, the target
head at T' independent fractions τ' and at the online net's preferred next
action; both share the learner's n-step, done-masked, PopArt-normalised targets.
"""

from __future__ import annotations

from typing import Any

import torch

from foxhunt.hookspecs import hookimpl
from foxhunt.learner import LossInputs, quantile_huber
from foxhunt.records import LossComponent

__all__ = ["NAME", "DEFAULT_BUDGET", "iqn_loss", "iqn_per_branch", "foxhunt_loss_components"]

NAME = "iqn"
DEFAULT_BUDGET = 0.20  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)


def iqn_per_branch(inputs: LossInputs) -> torch.Tensor:
    """Quantile-Huber loss ``[B, Branch]``."""
    online = inputs.online
    pred = inputs.taken(online.quantiles, action_dim=3).transpose(1, 2)  # [B, Branch, T]
    taus = online.taus[:, None, :]  # [B, 1, T]
    return quantile_huber(pred, inputs.target_quantiles, taus.expand_as(pred), inputs.config.kappa)


def iqn_loss(inputs: LossInputs) -> torch.Tensor:
    return inputs.batch_mean(inputs.branch_mean(iqn_per_branch(inputs)))


@hookimpl
def foxhunt_loss_components(config: Any) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=iqn_loss,
            description="quantile-Huber loss of the IQN head over sampled fractions, per branch",
        )
    ]
