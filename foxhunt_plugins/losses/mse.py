"""MSE: expected-value TD loss on the C51 heads' expected Q.

``0.5 (Q(s, a) - y)²`` per branch with ``y = r + γ^m E[Z'(s', a*)]``. It gives
the expected values a direct regression signal next to c51's distributional
one; how much it counts against c51 is its gradient budget.
"""

from __future__ import annotations

from typing import Any

import torch

from foxhunt import LossComponent, LossInputs, hookimpl

__all__ = ["NAME", "DEFAULT_BUDGET", "mse_loss", "td_error", "foxhunt_loss_components"]

NAME = "mse"
DEFAULT_BUDGET = 0.15  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)


def mse_loss(inputs: LossInputs) -> torch.Tensor:
    delta = inputs.taken(inputs.online.q) - inputs.target_q  # [B, Branch]
    return inputs.batch_mean(inputs.branch_mean(0.5 * delta * delta))


def td_error(inputs: LossInputs) -> torch.Tensor:
    """Raw TD error ``[B]``: mean over branches of ``|y - Q(s, a)|``."""
    return (inputs.target_q - inputs.taken(inputs.online.q)).abs().mean(-1).detach()


@hookimpl
def foxhunt_loss_components(config: Any) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=mse_loss,
            description="squared TD error of the expected Q of the taken action, per branch",
            per_sample=td_error,
        )
    ]
