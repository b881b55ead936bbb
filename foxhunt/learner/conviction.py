"""Conviction: the agent changes its position only when a trade beats holding by a margin.

Two margins, each off at 0, both on the direction branch and in PopArt-normalised units:

- ``[learner] conviction_floor = c``: a fixed margin. ``c`` is added to the expected Q of ``HOLD`` (keep the
  current position); in return units that is ``c · σ_direction``.
- ``[learner] conviction_spread = k``: a margin scaled by the ensemble's disagreement. Each other direction ``a``
  loses ``k · s(a)``, where ``s(a)`` is the standard deviation over the K ensemble heads (``K - 1`` in the
  denominator) of that head's advantage ``Q_k(a) - Q_k(HOLD)``. Where the heads agree on a trade it costs
  little; where they disagree (an edge the data does not pin down) holding wins.

The greedy direction is then ``HOLD`` unless another direction's expected Q exceeds ``Q(HOLD)`` by more than
both margins together (on an exact tie the lower-numbered action wins, as argmax always does). Every acting path
computes its values through :func:`acting_q`: the learner's :meth:`act_values
<foxhunt.learner.Learner.act_values>` that the training exploration reads, :meth:`Policy.act_values
<foxhunt.policy.Policy.act_values>` that the backtests read, and the exported ``GreedyPolicy``. The learner's
targets and losses never see either margin: they shape acting only. Both at 0 (the default) add nothing: the
values are bit for bit the network's.
"""

from __future__ import annotations

import torch

from foxhunt.actions import Branch, Direction

__all__ = ["with_conviction_floor", "with_conviction_spread", "acting_q"]


def with_conviction_floor(q: torch.Tensor, floor: float) -> torch.Tensor:
    """``q [N, Branch, A]`` (normalised units) with ``floor`` added to the direction branch's HOLD (a new tensor)."""
    bonus = torch.zeros(q.shape[1:], dtype=q.dtype, device=q.device)
    bonus[Branch.DIRECTION, Direction.HOLD] = floor
    return q + bonus


def with_conviction_spread(q: torch.Tensor, ensemble: torch.Tensor, spread: float) -> torch.Tensor:
    """``q [N, Branch, A]`` with each direction lowered by ``spread`` times the ensemble's standard deviation of its
    advantage over HOLD; ``ensemble [K, N, Branch, A]`` in the same units. HOLD's own deviation is 0."""
    direction = ensemble[:, :, Branch.DIRECTION, :]  # [K, N, A]
    advantage = direction - direction[:, :, Direction.HOLD:Direction.HOLD + 1]
    penalty = spread * advantage.std(dim=0)  # [N, A]
    others = torch.zeros_like(q)
    others[:, Branch.DIRECTION, :] = penalty
    return q - others


def acting_q(network: torch.nn.Module, x: torch.Tensor, support: torch.Tensor, floor: float,
             spread: float) -> torch.Tensor:
    """The values every acting path takes its argmax of, normalised ``[N, Branch, A]``: the network's expected Q
    of input ``x`` with the conviction margins (constants of the run: at 0 they cost nothing and add nothing)."""
    if spread > 0:
        h = network.features(x)
        q = with_conviction_spread(network.expected_q_of(h, support), network.ensemble_values(h), spread)
    else:
        q = network.expected_q(x, support)
    if floor > 0:
        q = with_conviction_floor(q, floor)
    return q
