"""The conviction floor: the agent changes its position only when a trade beats holding by a margin.

With ``[learner] conviction_floor = c > 0`` every acting path (the learner's :meth:`act_values
<foxhunt.learner.Learner.act_values>` that the training exploration reads, :meth:`Policy.act_values
<foxhunt.policy.Policy.act_values>` that the backtests read, and the exported ``GreedyPolicy``) adds ``c`` to the
expected Q of the direction branch's ``HOLD`` action in PopArt-normalised units, before the values are
unnormalised. In return units that is ``c · σ_direction``: the greedy direction is ``HOLD`` (keep the current
position) unless another direction's expected Q exceeds ``Q(HOLD)`` by more than ``c`` PopArt standard deviations
(on an exact tie the lower-numbered action wins, as argmax always does). The learner's targets and losses never see
it: it shapes acting only. ``c = 0`` (the default) adds nothing: the values are bit for bit the network's.
"""

from __future__ import annotations

import torch

from foxhunt.actions import Branch, Direction

__all__ = ["with_conviction_floor"]


def with_conviction_floor(q: torch.Tensor, floor: float) -> torch.Tensor:
    """``q [N, Branch, A]`` (normalised units) with ``floor`` added to the direction branch's HOLD (a new tensor)."""
    bonus = torch.zeros(q.shape[1:], dtype=q.dtype, device=q.device)
    bonus[Branch.DIRECTION, Direction.HOLD] = floor
    return q + bonus
