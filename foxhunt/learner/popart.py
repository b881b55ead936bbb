"""PopArt: adaptive normalisation of return targets, with output-preserving rescaling (van Hasselt et al. 2016).

The learner trains every head in *normalised* return units: ``y_norm = (y - μ) / σ``
per branch. When the statistics move from ``(μ, σ)`` to ``(μ', σ')``, each
value-producing final layer is rescaled so its *unnormalised* output
``σ·f(x) + μ`` is exactly unchanged::

    W' = (σ / σ') W        b' = (σ b + μ - μ') / σ'

That correction is applied to the online and the target network alike. It
applies to layers whose outputs are values — the IQN quantile layer, the
ensemble heads and, when a loss asked for it, the state-value head (rows
``[Branch, E]``, rescaled per branch). The C51 heads output logits over a fixed (normalised) support,
and no change of logits can move a categorical distribution's atoms, so C51
gets the "ART" half only: its targets are normalised with the current
statistics, and its unnormalised prediction drifts by O(popart_beta) per update
until the targets pull it back (docs/learner.md, "PopArt").

Statistics are per branch (each branch discounts with its own γ, so its returns
have their own scale). They are training-persist state: they are coupled to the
persisted network weights, and resetting them alone would change every output.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PopArt"]


class PopArt(nn.Module):
    """Per-branch return statistics ``mu``/``nu`` (first and second moment) as buffers ``[Branch]``."""

    def __init__(self, n_branches: int, n_actions: int, beta: float, sigma_min: float, enabled: bool,
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.n_actions = n_actions
        self.beta = float(beta)  # constant for the run
        self.sigma_min = float(sigma_min)
        self.enabled = enabled
        self.register_buffer("mu", torch.zeros(n_branches, device=device, dtype=dtype))
        self.register_buffer("nu", torch.ones(n_branches, device=device, dtype=dtype))

    @property
    def sigma(self) -> torch.Tensor:
        return torch.sqrt(torch.clamp(self.nu - self.mu * self.mu, min=self.sigma_min**2))

    def normalize(self, y: torch.Tensor) -> torch.Tensor:
        """``y [..., Branch]`` unnormalised -> normalised."""
        return (y - self.mu) / self.sigma

    def unnormalize_q(self, q: torch.Tensor) -> torch.Tensor:
        """Action values ``q [N, Branch, A]`` in normalised units -> the returns' own units."""
        return q * self.sigma[None, :, None] + self.mu[None, :, None]

    @torch.no_grad()
    def update(self, targets: torch.Tensor, layers: list[nn.Module], branch_layers: list[nn.Module] = ()) -> None:
        """Move the statistics toward the batch of unnormalised ``targets [B, Branch]`` and rescale ``layers``.

        ``layers`` hold rows ordered ``(Branch, A)`` in their last output
        dimension (``weight [..., Branch*A, in]``, ``bias [..., Branch*A]``);
        ``branch_layers`` hold rows ``[Branch, E]`` (``weight [Branch, E, in]``, ``bias [Branch, E]``).
        """
        if not self.enabled:
            return
        mu_old, sigma_old = self.mu.clone(), self.sigma
        self.mu.lerp_(targets.mean(0), self.beta)
        self.nu.lerp_((targets * targets).mean(0), self.beta)
        self.rescale(mu_old, sigma_old, layers)
        if branch_layers:  # a fixed list for the run: no branch on a tensor value
            self.rescale_branch_layers(mu_old, sigma_old, branch_layers)

    @torch.no_grad()
    def rescale_branch_layers(self, mu_old: torch.Tensor, sigma_old: torch.Tensor, layers: list[nn.Module]) -> None:
        """:meth:`rescale` for layers whose rows are ``[Branch, E]`` (E values of each branch)."""
        sigma_new = self.sigma
        scale = (sigma_old / sigma_new)[:, None]  # [Branch, 1]
        shift = ((mu_old - self.mu) / sigma_new)[:, None]
        for layer in layers:
            layer.weight.mul_(scale[..., None])
            layer.bias.mul_(scale).add_(shift)

    @torch.no_grad()
    def rescale(self, mu_old: torch.Tensor, sigma_old: torch.Tensor, layers: list[nn.Module]) -> None:
        """Apply the output-preserving correction from ``(mu_old, sigma_old)`` to the current statistics."""
        sigma_new = self.sigma
        # expand + reshape, not repeat_interleave: that one reads its output size back to the host
        rows = (sigma_new.shape[0], self.n_actions)
        scale = (sigma_old / sigma_new)[:, None].expand(rows).reshape(-1)  # [Branch*A]
        shift = ((mu_old - self.mu) / sigma_new)[:, None].expand(rows).reshape(-1)
        for layer in layers:
            layer.weight.mul_(scale[:, None])
            layer.bias.mul_(scale).add_(shift * _row_mask(layer))


def _row_mask(layer: nn.Module) -> torch.Tensor | float:
    # padded action rows must stay exactly zero, so they take no shift
    mask = getattr(layer, "row_mask", None)
    return 1.0 if mask is None else mask
