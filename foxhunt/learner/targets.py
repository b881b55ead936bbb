"""``Targets``: the target side of one update, in unnormalised return units or PopArt's normalised ones."""

from __future__ import annotations

import dataclasses

import torch

__all__ = ["Targets"]


@dataclasses.dataclass(frozen=True)  # not attrs.frozen: torch.compile traces dataclass construction
class Targets:
    """The target side of one update: :meth:`foxhunt.learner.Learner.targets` gives unnormalised return units,
    :meth:`normalised` PopArt's.

    ``atoms``/``probs`` ``[B, Branch, N]``; ``expected`` ``[B, Branch]``; ``quantiles`` ``[B, Branch, T']``;
    ``rewards`` ``[B, Branch]``: the n-step discounted reward part ``r`` of every target (``expected`` is
    ``r + γ^m E[Z']``), the execution credit included when ``[learner] execution_regret`` adds it, so that
    ``expected − rewards`` is exactly the bootstrapped remainder (what a horizon-decomposed value head splits);
    ``taken_q`` ``[B, Branch]``: the target network's expected Q of the taken action at the sampled state
    ``s`` (what a state-value head regresses on), only when the network has one, else ``None``.
    """

    atoms: torch.Tensor
    probs: torch.Tensor
    expected: torch.Tensor
    quantiles: torch.Tensor
    rewards: torch.Tensor
    taken_q: torch.Tensor | None = None

    def normalised(self, mu: torch.Tensor, sigma: torch.Tensor) -> Targets:
        """In normalised units under per-branch statistics ``mu``/``sigma`` ``[Branch]`` (probabilities unchanged).

        ``rewards`` goes through the same affine map as ``expected``, so a head predicting both in these units
        has ``σ (expected − rewards) = γ^m E[Z']`` between them."""
        return Targets(
            atoms=(self.atoms - mu[:, None]) / sigma[:, None],
            probs=self.probs,
            expected=(self.expected - mu) / sigma,
            quantiles=(self.quantiles - mu[:, None]) / sigma[:, None],
            rewards=(self.rewards - mu) / sigma,
            taken_q=None if self.taken_q is None else (self.taken_q - mu) / sigma,
        )
