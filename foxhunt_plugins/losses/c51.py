"""C51: categorical cross-entropy against the projected n-step target distribution, per branch.

The learner supplies the shifted target atoms ``r + γ^m z'`` and their
target-network probabilities at the online net's preferred next action (double
DQN, done-masked through ``γ^m = 0``); this component projects them onto the
branch's support and takes the cross-entropy with the online distribution of
the taken action. The target atoms arrive sorted, so it uses the O(N log N)
prefix-sum form of the hat projection (deterministic, no ``[N, N]`` intermediate).

Label smoothing mixes the projected target with the uniform distribution with
strength ``label_smoothing_max × (1 - health)``: when the learning-health slot
says training is going badly, targets soften and the gradients calm down.
``label_smoothing_max`` is this plugin's setting, ``[plugins.c51]``.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
import torch

from foxhunt import LossComponent, LossInputs, Registrar, hookimpl
from foxhunt.contract import HEALTH
from foxhunt.learner import project_sorted

__all__ = ["NAME", "DEFAULT_BUDGET", "C51Settings", "c51_loss", "c51_per_branch", "expected_td_error", "foxhunt_declare",
           "foxhunt_loss_components"]

NAME = "c51"
DEFAULT_BUDGET = 0.40  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)
LABEL_SMOOTHING_MAX = 0.1


@attrs.frozen
class C51Settings:
    """``[plugins.c51]``: the label smoothing applied at health 0 (none at health 1)."""

    label_smoothing_max: float = attrs.field(
        default=LABEL_SMOOTHING_MAX, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)]
    )


def c51_per_branch(inputs: LossInputs, label_smoothing_max: float = LABEL_SMOOTHING_MAX) -> torch.Tensor:
    """Cross-entropy ``[B, Branch]``."""
    # r + γ^m z is sorted along N, so the O(N log N) projection applies
    # onto the shared support ([1, Branch, N]) or, when a component centres the atoms, each sample's own ([B, Branch, N])
    projected = project_sorted(inputs.target_atoms, inputs.target_probs, inputs.batch_support())  # [B, Branch, N]
    n_atoms = projected.shape[-1]
    smoothing = label_smoothing_max * (1.0 - torch.clamp(inputs.health, 0.0, 1.0))  # [1]
    target = (1.0 - smoothing) * projected + smoothing / n_atoms
    log_probs = inputs.taken(inputs.online.log_probs)  # [B, Branch, N]
    return -(target * log_probs).sum(-1)


def c51_loss(inputs: LossInputs, label_smoothing_max: float = LABEL_SMOOTHING_MAX) -> torch.Tensor:
    return inputs.batch_mean(inputs.branch_mean(c51_per_branch(inputs, label_smoothing_max)))


def expected_td_error(inputs: LossInputs) -> torch.Tensor:
    """Raw TD error per sample ``[B]``: mean over branches of ``|E[target] - Q(s, a)|`` (priorities)."""
    q_taken = inputs.taken(inputs.online.q)  # [B, Branch]
    return (inputs.target_q - q_taken).abs().mean(-1).detach()


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(C51Settings)


@hookimpl
def foxhunt_loss_components(config: Any, settings: C51Settings) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(c51_loss, label_smoothing_max=settings.label_smoothing_max),
            description="categorical cross-entropy against the projected double-DQN n-step target, per branch",
            reads=(HEALTH,),
            optional_reads=(HEALTH,),  # the learner reads 1.0 (no smoothing) when the health plugin is not loaded
            per_sample=expected_td_error,
        )
    ]
