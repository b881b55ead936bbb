"""IQN: quantile-Huber regression of the IQN head toward the target head's quantiles (Dabney et al. 2018).

The online head is evaluated at T fractions τ drawn for this update, the target
head at T' independent fractions τ' and at the online net's preferred next
action; both share the learner's n-step, done-masked, PopArt-normalised targets.
The Huber threshold κ is this plugin's setting, ``[plugins.iqn] kappa``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import attrs
import torch

from foxhunt import LossComponent, LossInputs, Registrar, hookimpl
from foxhunt.learner import quantile_huber

__all__ = ["NAME", "DEFAULT_BUDGET", "IqnSettings", "iqn_loss", "iqn_per_branch", "foxhunt_declare",
           "foxhunt_loss_components"]

NAME = "iqn"
DEFAULT_BUDGET = 0.20  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)
KAPPA = 1.0


def _positive_finite(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number > 0: {value!r}")


@attrs.frozen
class IqnSettings:
    """``[plugins.iqn]``: the quantile-Huber threshold κ (PopArt-normalised return units)."""

    kappa: float = attrs.field(default=KAPPA, validator=_positive_finite)


def iqn_per_branch(inputs: LossInputs, kappa: float = KAPPA) -> torch.Tensor:
    """Quantile-Huber loss ``[B, Branch]``."""
    online = inputs.online
    pred = inputs.taken(online.quantiles, action_dim=3).transpose(1, 2)  # [B, Branch, T]
    taus = online.taus[:, None, :]  # [B, 1, T]
    return quantile_huber(pred, inputs.target_quantiles, taus.expand_as(pred), kappa)


def iqn_loss(inputs: LossInputs, kappa: float = KAPPA) -> torch.Tensor:
    return inputs.batch_mean(inputs.branch_mean(iqn_per_branch(inputs, kappa)))


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(IqnSettings)


@hookimpl
def foxhunt_loss_components(config: Any, settings: IqnSettings) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(iqn_loss, kappa=settings.kappa),
            description="quantile-Huber loss of the IQN head over sampled fractions, per branch",
        )
    ]
