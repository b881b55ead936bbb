"""Ensemble: negative-correlation learning across the K value heads (Liu & Yao 1999).

Each head regresses the shared expected target ``y`` and is rewarded for
disagreeing with the ensemble mean ``Q̄``::

    L = mean_k [ ½ (Q_k - y)² - λ · ½ (Q_k - Q̄)² ]  =  ½ (Q̄ - y)² + (1 - λ) · ½ Var_k(Q)

so for ``λ = ensemble_diversity < 1`` the loss is bounded below by 0: the
diversity term spreads the heads (their spread is the epistemic-uncertainty
signal) without being able to run away.
"""

from __future__ import annotations

from typing import Any

import torch

from foxhunt.hookspecs import hookimpl
from foxhunt.learner import LossInputs
from foxhunt.records import LossComponent

__all__ = ["NAME", "DEFAULT_BUDGET", "ensemble_loss", "foxhunt_loss_components"]

NAME = "ensemble"
DEFAULT_BUDGET = 0.15  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)


def ensemble_loss(inputs: LossInputs) -> torch.Tensor:
    heads = inputs.online.ensemble.transpose(0, 1)  # [B, K, Branch, A]
    q = inputs.taken(heads, action_dim=3)  # [B, K, Branch]
    fit = 0.5 * (q - inputs.target_q[:, None, :]) ** 2
    spread = 0.5 * (q - q.mean(1, keepdim=True)) ** 2
    per_branch = (fit - inputs.config.ensemble_diversity * spread).mean(1)  # [B, Branch]
    return inputs.batch_mean(inputs.branch_mean(per_branch))


@hookimpl
def foxhunt_loss_components(config: Any) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=ensemble_loss,
            description="ensemble value heads: TD fit with a negative-correlation diversity term",
        )
    ]
