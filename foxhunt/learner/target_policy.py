"""Expected-SARSA bootstrap targets: the next state's value under softmax(Q/τ) per branch, not the greedy action's.

With ``[learner] target_policy = "expected_sarsa"`` the target side of an update replaces double DQN's greedy
next action (the online net's argmax, evaluated by the target net) by the expectation under the policy

    π_b(a | s') = softmax_a(Q_online,b(s', a) / τ_b)        over branch b's real actions

where ``Q_online`` is the online network's expected Q in PopArt-normalised units and ``τ_b`` is the
``sarsa.temperature`` ISV slot (``[plugins.expected_sarsa] temperature``). Each sample gets its own policy (its own
next-state Q); τ is per branch, the same for every sample of a batch. Then, with the target network's outputs:

* C51: the target distribution is the π-mixture of the actions' distributions, ``p(z) = Σ_a π(a) p_a(z)`` on the
  branch's atoms (one support per branch, shared by its actions), projected as before;
* IQN: the target quantile at each fraction is the π-average ``Σ_a π(a) q_a(τ')`` of the actions' quantile
  functions. Its mean over fractions is the π-expectation of the actions' Q, as Expected SARSA asks; it is not
  the quantile function of the mixture (that would need the actions' samples pooled with weights).

As τ → 0 the policy is the greedy one and both reduce to the double-DQN targets; large τ averages the actions
evenly. Padded action slots (``-inf`` Q) get weight 0.
"""

from __future__ import annotations

import torch

__all__ = ["expected_sarsa_next", "softmax_policy"]


def softmax_policy(q: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """``softmax(q / τ)`` over the last axis: ``q [B, Branch, A]`` (``-inf`` on padded actions), ``τ [Branch]``."""
    return torch.softmax(q / temperature.to(q.dtype)[:, None], dim=-1)


def expected_sarsa_next(q: torch.Tensor, log_probs: torch.Tensor, quantiles: torch.Tensor,
                        temperature: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The next state's target distribution and quantiles under ``softmax(q / τ)``.

    ``q [B, Branch, A]`` the online net's expected Q at ``s'``; ``log_probs [B, Branch, A, N]`` and
    ``quantiles [B, T', Branch, A]`` the target net's. Returns ``probs [B, Branch, N]`` (the π-mixture) and
    ``quantiles [B, Branch, T']`` (the π-average), laid out as the greedy targets are.
    """
    policy = softmax_policy(q, temperature)  # [B, Branch, A]
    probs = (policy[..., None] * log_probs.exp()).sum(2)
    averaged = (policy[:, None] * quantiles).sum(-1)  # [B, T', Branch]
    return probs, averaged.transpose(1, 2)
