"""Ensemble: negative-correlation learning across the K value heads (Liu & Yao 1999).

Each head regresses the shared expected target ``y`` and is rewarded for
disagreeing with the ensemble mean ``Q̄``::

    L = mean_k [ ½ (Q_k - y)² - λ · ½ (Q_k - Q̄)² ]  =  ½ (Q̄ - y)² + (1 - λ) · ½ Var_k(Q)

so for ``λ = diversity < 1`` (``[plugins.ensemble] diversity``) the loss is
bounded below by 0: the diversity term spreads the heads (their spread is the
epistemic-uncertainty signal) without being able to run away.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
import torch

from foxhunt import LossComponent, LossInputs, Registrar, hookimpl

__all__ = ["NAME", "DEFAULT_BUDGET", "EnsembleSettings", "ensemble_loss", "foxhunt_declare", "foxhunt_loss_components"]

NAME = "ensemble"
DEFAULT_BUDGET = 0.15  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)
DIVERSITY = 0.5


@attrs.frozen
class EnsembleSettings:
    """``[plugins.ensemble]``: λ, the weight of the diversity term; below 1 so the loss stays bounded below."""

    diversity: float = attrs.field(default=DIVERSITY, validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)])


def ensemble_loss(inputs: LossInputs, diversity: float = DIVERSITY) -> torch.Tensor:
    heads = inputs.online.ensemble.transpose(0, 1)  # [B, K, Branch, A]
    q = inputs.taken(heads, action_dim=3)  # [B, K, Branch]
    fit = 0.5 * (q - inputs.target_q[:, None, :]) ** 2
    spread = 0.5 * (q - q.mean(1, keepdim=True)) ** 2
    per_branch = (fit - diversity * spread).mean(1)  # [B, Branch]
    return inputs.batch_mean(inputs.branch_mean(per_branch))


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(EnsembleSettings)


@hookimpl
def foxhunt_loss_components(config: Any, settings: EnsembleSettings) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(ensemble_loss, diversity=settings.diversity),
            description="ensemble value heads: TD fit with a negative-correlation diversity term",
        )
    ]
