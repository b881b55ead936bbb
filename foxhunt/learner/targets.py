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
    ``taken_q`` ``[B, Branch]``: the target network's expected Q of the taken action at the sampled state
    ``s`` (what a state-value head regresses on), only when the network has one, else ``None``.
    """

    atoms: torch.Tensor
    probs: torch.Tensor
    expected: torch.Tensor
    quantiles: torch.Tensor
    taken_q: torch.Tensor | None = None

    def normalised(self, mu: torch.Tensor, sigma: torch.Tensor) -> Targets:
        """In normalised units under per-branch statistics ``mu``/``sigma`` ``[Branch]`` (probabilities unchanged)."""
        return Targets(
            atoms=(self.atoms - mu[:, None]) / sigma[:, None],
            probs=self.probs,
            expected=(self.expected - mu) / sigma,
            quantiles=(self.quantiles - mu[:, None]) / sigma[:, None],
            taken_q=None if self.taken_q is None else (self.taken_q - mu) / sigma,
        )
