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

``[learner] popart_stats`` picks the statistics: ``"moments"`` (the default,
:class:`PopArt`: EMAs of the batch mean and second moment) or ``"robust"``
(:class:`RobustPopArt`: EMAs of the batch quartiles, ``μ`` the running median and
``σ`` the running interquartile range over a normal's, ``IQR / 1.349``). Both
rescale the same layers the same way; only how ``(μ, σ)`` move differs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["IQR_NORMAL", "PopArt", "RobustPopArt", "popart_of"]

# The interquartile range of a standard normal, 2·Φ⁻¹(0.75): IQR / IQR_NORMAL estimates σ for normal returns.
IQR_NORMAL = 1.3489795003921634
QUARTILES = (0.25, 0.5, 0.75)


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
        self._register_scale(n_branches, device, dtype)
        # Multi-device runs set it (foxhunt/trainer/distributed.py) so every rank moves the same statistics.
        self.moments_sync: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None

    def _register_scale(self, n_branches: int, device: torch.device | str, dtype: torch.dtype) -> None:
        self.register_buffer("nu", torch.ones(n_branches, device=device, dtype=dtype))

    @property
    def sigma(self) -> torch.Tensor:
        return torch.sqrt(torch.clamp(self.nu - self.mu * self.mu, min=self.sigma_min**2))

    def _move(self, targets: torch.Tensor) -> None:
        """Move the statistics toward the batch ``targets [B, Branch]`` at rate ``beta``."""
        mean, square = targets.mean(0), (targets * targets).mean(0)
        if self.moments_sync is not None:  # multi-device: the batch moments of every rank's batch, averaged
            mean, square = self.moments_sync(mean, square)
        self.mu.lerp_(mean, self.beta)
        self.nu.lerp_(square, self.beta)

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
        self._move(targets)
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


class RobustPopArt(PopArt):
    """PopArt whose statistics are the running quartiles: ``mu`` the median, ``lower``/``upper`` Q1/Q3 ``[Branch]``.

    Each update computes the batch's quartiles per branch (linear interpolation between order statistics,
    numpy's default ``"linear"`` method) and moves each running quartile toward its batch value at rate
    ``beta``, as :class:`PopArt` moves its moments: ``q ← (1 − β) q + β q_batch``. ``σ = max((Q3 − Q1) /
    IQR_NORMAL, sigma_min)``. A convex combination of ordered values stays ordered, so ``lower ≤ mu ≤ upper``
    always. The start is a standard normal's quartiles: ``μ = 0``, ``σ = 1``, as :class:`PopArt` starts.
    A few extreme targets in a batch move a batch quartile by at most a few order statistics, where they
    move the batch mean and second moment without bound: that is the point of the choice.
    With several devices ``moments_sync`` averages the ranks' batch quartiles (an approximation of the
    union's quartiles, exact when the ranks' batches have the same ones).
    """

    def _register_scale(self, n_branches: int, device: torch.device | str, dtype: torch.dtype) -> None:
        half = IQR_NORMAL / 2
        self.register_buffer("lower", torch.full((n_branches,), -half, device=device, dtype=dtype))
        self.register_buffer("upper", torch.full((n_branches,), half, device=device, dtype=dtype))

    @property
    def sigma(self) -> torch.Tensor:
        return torch.clamp((self.upper - self.lower) / IQR_NORMAL, min=self.sigma_min)

    def _move(self, targets: torch.Tensor) -> None:
        q1, median, q3 = batch_quartiles(targets)
        if self.moments_sync is not None:  # multi-device: each quartile averaged over the ranks, one all-reduce
            low, high = self.moments_sync(torch.stack([q1, median]), torch.stack([median, q3]))
            q1, median, q3 = low[0], low[1], high[1]
        self.mu.lerp_(median, self.beta)
        self.lower.lerp_(q1, self.beta)
        self.upper.lerp_(q3, self.beta)


def batch_quartiles(targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Q1, median, Q3 of ``targets [B, Branch]`` over the batch, each ``[Branch]`` (numpy's "linear" method).

    One sort; the interpolation positions come from the static batch size, so nothing is read to the host.
    """
    ordered = torch.sort(targets, dim=0).values
    last = targets.shape[0] - 1
    out = []
    for q in QUARTILES:
        position = q * last
        below = int(position)
        frac = position - below
        above = min(below + 1, last)
        out.append(ordered[below] + frac * (ordered[above] - ordered[below]))
    return tuple(out)


def popart_of(stats: str, n_branches: int, n_actions: int, beta: float, sigma_min: float, enabled: bool,
              device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> PopArt:
    """The PopArt that ``[learner] popart_stats`` names: ``"moments"`` or ``"robust"``."""
    kinds = {"moments": PopArt, "robust": RobustPopArt}
    if stats not in kinds:
        raise ValueError(f"[learner] popart_stats must be one of {sorted(kinds)}, got {stats!r}")
    return kinds[stats](n_branches, n_actions, beta, sigma_min, enabled, device, dtype)


def _row_mask(layer: nn.Module) -> torch.Tensor | float:
    # padded action rows must stay exactly zero, so they take no shift
    mask = getattr(layer, "row_mask", None)
    return 1.0 if mask is None else mask
