"""Spectral normalisation of every weight matrix by power iteration, applied as a projection.

After each optimiser step the largest singular value σ of every weight matrix is
estimated by power iteration and the matrix is rescaled by ``min(1, σ_max / σ)``:
weights are only ever shrunk, and only when σ exceeds the bound. Doing it as a
projection (instead of reparametrising the forward pass) keeps the forward a
plain function of the stored weights, so finite differences, the target network
and checkpoints all see the same matrices.

The left/right singular-vector estimates ``u``/``v`` are training state. They
are registered *training-persist*: they track the weights, which persist across
folds, and a reset would only make the next estimates worse (a fresh random
start under-estimates σ until it converges).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SpectralNorm"]


def _normalize(x: torch.Tensor) -> torch.Tensor:
    # eps keeps a zero matrix (all-masked rows at init) from producing NaN without a branch
    return x / (x.norm(dim=-1, keepdim=True) + 1e-12)


class SpectralNorm(nn.Module):
    """Holds ``u``/``v`` buffers for a fixed list of weights; :meth:`project` bounds them all.

    ``weights`` may be ``[out, in]`` or batched ``[group, out, in]`` (one bound per
    matrix of the group: the per-branch and per-ensemble-head layers).
    """

    def __init__(self, weights: list[nn.Parameter], sigma_max: float, iterations: int, generator: torch.Generator) -> None:
        super().__init__()
        self.weights = list(weights)
        self.sigma_max = float(sigma_max)  # fixed for the run: a constant, not a per-step scalar
        self.iterations = int(iterations)
        for index, weight in enumerate(self.weights):
            lead, out_features, in_features = weight.shape[:-2], weight.shape[-2], weight.shape[-1]
            u = torch.randn(*lead, out_features, generator=generator, device=weight.device, dtype=weight.dtype)
            v = torch.randn(*lead, in_features, generator=generator, device=weight.device, dtype=weight.dtype)
            self.register_buffer(f"u{index}", _normalize(u))
            self.register_buffer(f"v{index}", _normalize(v))

    def vectors(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(getattr(self, f"u{i}"), getattr(self, f"v{i}")) for i in range(len(self.weights))]

    @torch.no_grad()
    def project(self, iterations: int | None = None) -> None:
        """Refine ``u``/``v`` and shrink every matrix whose σ estimate exceeds ``sigma_max`` (in place)."""
        steps = self.iterations if iterations is None else iterations
        for weight, (u, v) in zip(self.weights, self.vectors(), strict=True):
            for _ in range(steps):
                # products as multiply-and-sum, not matrix-vector calls: compiled, each step is one fused reduction
                v.copy_(_normalize((weight * u[..., :, None]).sum(-2)))
                u.copy_(_normalize((weight * v[..., None, :]).sum(-1)))
            sigma = (u * (weight * v[..., None, :]).sum(-1)).sum(-1)
            scale = torch.clamp(self.sigma_max / (sigma + 1e-12), max=1.0)
            weight.mul_(scale[..., None, None])
