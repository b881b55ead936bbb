"""The Huber TD loss: quadratic for small TD errors, linear for large ones.

``ρ(δ) = ½δ²`` for ``|δ| ≤ κ`` and ``κ(|δ| − ½κ)`` beyond, with ``δ = Q(s, a) − y``
per action branch and ``y = r + γ^m E[Z'(s', a*)]`` (the learner's expected
n-step target). Its gradient never exceeds ``κ`` per sample, so a few huge TD
errors (a gap in the market, a fill far from the close) cannot dominate an
update the way they do under the squared error.
"""

from __future__ import annotations

import torch

__all__ = ["KAPPA", "huber", "huber_loss", "td_error"]

KAPPA = 1.0  # default threshold ([plugins.huber] kappa), in PopArt-normalised return units where targets have unit scale


def huber(delta: torch.Tensor, kappa: float = KAPPA) -> torch.Tensor:
    """Elementwise Huber penalty of ``delta``."""
    magnitude = delta.abs()
    quadratic = torch.clamp(magnitude, max=kappa)
    # ½q² + κ(|δ| − q) equals ½δ² inside the threshold and κ(|δ| − ½κ) outside, with no branch on values.
    return 0.5 * quadratic * quadratic + kappa * (magnitude - quadratic)


def huber_loss(inputs, kappa: float = KAPPA) -> torch.Tensor:
    """Scalar loss for one update from the learner's ``LossInputs``, with threshold ``kappa``."""
    delta = inputs.taken(inputs.online.q) - inputs.target_q  # [B, Branch]
    return inputs.batch_mean(inputs.branch_mean(huber(delta, kappa)))


def td_error(inputs) -> torch.Tensor:
    """Raw TD error ``[B]`` for replay priorities: mean over branches of ``|y − Q(s, a)|``."""
    return (inputs.target_q - inputs.taken(inputs.online.q)).abs().mean(-1).detach()
