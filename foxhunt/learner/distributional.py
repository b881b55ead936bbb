"""Distributional maths shared by the loss plugins: the C51 projection and the quantile-Huber loss.

All are pure functions of tensors (no module state), so they are tested
directly against float64 references and any third-party loss can reuse them.

Supports may be shared or per sample. The shared support is ``[Branch, N]``
(one set of atoms per branch for the whole batch); a per-sample support is
``[B, Branch, N]`` (atoms centred on each sample's own state value, built by
:func:`centred_support`). Both the source support (the next state's atoms, which
:func:`shifted_atoms` moves to ``r + γ^m z``) and the target support (the atoms
the projection lands on) can be either: every function broadcasts over the
leading dimensions, and a shared support goes through exactly the arithmetic it
went through before per-sample supports existed (tested bit for bit).
"""

from __future__ import annotations

import torch

__all__ = ["centred_support", "project_distribution", "project_sorted", "projection_error_gradient", "quantile_huber", "shifted_atoms", "support_atoms"]


def support_atoms(center: torch.Tensor, half_width: torch.Tensor, n_atoms: int, unit: torch.Tensor) -> torch.Tensor:
    """The atoms per branch: ``center + half_width × unit``, spanning ``center ± half_width``.

    ``center``, ``half_width``: ``[Branch]``; ``unit``: the atoms' places in ``[−1, 1]``, ``[atoms]`` shared
    (``linspace(-1, 1)``, passed in so the hot path allocates it once) or ``[Branch, atoms]`` per branch (the
    quantile spacing, :mod:`foxhunt.learner.atoms`). Returns ``[Branch, atoms]``.
    """
    return center[:, None] + half_width[:, None] * unit  # [Branch, 1] × [atoms] or [Branch, atoms]


def centred_support(center: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """A per-sample support: ``center [B, Branch]`` plus the shared atom offsets ``offsets [Branch, N]``.

    ``offsets`` are ``half_width × linspace(-1, 1)`` per branch, so sample ``i``'s
    atoms span ``center_i ± half_width``. Returns ``[B, Branch, N]``; increasing
    along N whenever the half-width is positive (the projection needs that).
    """
    return center[..., None] + offsets


def shifted_atoms(returns: torch.Tensor, discounts: torch.Tensor, source_support: torch.Tensor) -> torch.Tensor:
    """The bootstrapped target atoms ``r + γ^m z``: ``returns``, ``discounts`` ``[B, Branch]``.

    ``source_support`` is the next state's support, shared ``[Branch, N]`` or per
    sample ``[B, Branch, N]``. Returns ``[B, Branch, N]``, non-decreasing along N
    for ``γ^m >= 0`` and an increasing support (so :func:`project_sorted` applies).
    """
    if source_support.dim() == returns.dim():  # shared [Branch, N]: the form the learner always used
        source_support = source_support[None]
    return returns[..., None] + discounts[..., None] * source_support


def project_distribution(target_atoms: torch.Tensor, target_probs: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """Project a categorical distribution onto a (possibly non-uniform, increasing) support.

    ``target_atoms``, ``target_probs``: ``[..., j]`` (the shifted atoms ``r + γz``
    and their probabilities); ``support``: ``[..., i]`` broadcastable to them:
    shared (``[Branch, i]`` or ``[1, Branch, i]``) or per sample (``[B, Branch, i]``).
    Returns ``[..., i]``.

    Dense "hat" form: atom ``i`` receives from every target atom ``t`` the weight
    of the triangle that rises from ``z[i-1]`` to 1 at ``z[i]`` and falls to
    ``z[i+1]``. It is a sum of products with a fixed reduction order, so unlike
    scatter/index-add it is deterministic on every device. Target atoms outside
    the support are clamped to its ends (their mass goes to the end atom).
    """
    low, high = support[..., :1], support[..., -1:]
    gap = support[..., 1:] - support[..., :-1]  # [..., i-1]
    ones = torch.ones_like(low)
    # Neighbours of each atom. The end atoms get a virtual neighbour one unit outside with a unit
    # gap, so their outer edge evaluates to >= 1 for every clamped target and never binds.
    prev_atom = torch.cat([low - 1.0, support[..., :-1]], dim=-1).unsqueeze(-2)  # [..., 1, i]
    prev_gap = torch.cat([ones, gap], dim=-1).unsqueeze(-2)
    next_atom = torch.cat([support[..., 1:], high + 1.0], dim=-1).unsqueeze(-2)
    next_gap = torch.cat([gap, ones], dim=-1).unsqueeze(-2)
    t = torch.minimum(torch.maximum(target_atoms, low), high).unsqueeze(-1)  # [..., j, 1]
    rise = (t - prev_atom).div_(prev_gap)  # [..., j, i]
    fall = (next_atom - t).div_(next_gap)
    hat = torch.minimum(rise, fall).clamp_(min=0.0)
    return torch.einsum("...j,...ji->...i", target_probs, hat)


def project_sorted(target_atoms: torch.Tensor, target_probs: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """The same projection as :func:`project_distribution`, in O(N log N), for non-decreasing ``target_atoms``.

    C51's target atoms ``r + γ^m z`` are an increasing affine image of the
    support, so they arrive sorted. For sorted targets the projected *cumulative*
    mass at atom ``i`` needs only prefix sums over the targets::

        M_i = P(t <= z_i) + Σ_{z_i < t_j < z_{i+1}} p_j (z_{i+1} - t_j) / (z_{i+1} - z_i)

    where the sum is ``z_{i+1}·(P[hi] - P[lo]) - (S[hi] - S[lo])`` with prefix
    sums ``P`` of ``p`` and ``S`` of ``p·t`` and segment bounds from
    ``searchsorted``; ``m = diff(M)``. No ``[..., N, N]`` intermediate, no
    atomics (deterministic), and the prefix sums run in float64 so the
    differences lose nothing to cancellation. Unsorted targets give wrong
    results: use :func:`project_distribution` for those.

    ``support`` broadcasts against the targets' leading dimensions like the
    dense form's: shared (``[1, Branch, i]``) or per sample (``[B, Branch, i]``,
    each sample clamped to and projected onto its own atoms). A shared support
    expanded to every sample gives bit for bit the shared result (each row is
    computed on its own).
    """
    _, cumulative = _sorted_cdfs(target_atoms, target_probs, support)
    return torch.diff(cumulative, dim=-1, prepend=torch.zeros_like(cumulative[..., :1])).to(target_probs.dtype)


def _sorted_cdfs(target_atoms: torch.Tensor, target_probs: torch.Tensor,
                 support: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For sorted targets: ``(F [..., i-1], M [..., i])`` in float64.

    ``F_i = P(t <= z_i)`` at every atom but the last (the targets clamped into the support) and ``M_i`` the
    projected cumulative mass through atom ``i`` (the sum in :func:`project_sorted`'s docstring); ``M`` is also the
    mean of the targets' CDF over the cell ``[z_i, z_(i+1))``, which :func:`projection_error_gradient` uses.
    """
    n_targets = target_atoms.shape[-1]
    lead = torch.broadcast_shapes(target_atoms.shape[:-1], support.shape[:-1], target_probs.shape[:-1])
    z = support.to(torch.float64).expand(*lead, support.shape[-1]).contiguous()  # [..., i]
    t = target_atoms.to(torch.float64).expand(*lead, n_targets)
    t = torch.minimum(torch.maximum(t, z[..., :1]), z[..., -1:]).contiguous()  # [..., j], sorted
    p = target_probs.to(torch.float64).expand(*lead, n_targets)
    zero = torch.zeros_like(t[..., :1])
    prefix_p = torch.cat([zero, p.cumsum(-1)], dim=-1)  # [..., j+1]
    prefix_pt = torch.cat([zero, (p * t).cumsum(-1)], dim=-1)
    lower, upper = z[..., :-1].contiguous(), z[..., 1:].contiguous()  # [..., i-1]
    lo = torch.searchsorted(t, lower, right=True)  # targets <= z_i
    hi = torch.searchsorted(t, upper, right=False)  # targets < z_{i+1}
    p_lo, p_hi = prefix_p.gather(-1, lo), prefix_p.gather(-1, hi)
    inside = (upper * (p_hi - p_lo) - (prefix_pt.gather(-1, hi) - prefix_pt.gather(-1, lo))) / (upper - lower)
    cumulative = torch.cat([p_lo + inside, prefix_p[..., -1:]], dim=-1)  # [..., i]
    return p_lo, cumulative


def projection_error_gradient(target_atoms: torch.Tensor, target_probs: torch.Tensor,
                              support: torch.Tensor) -> torch.Tensor:
    """How the C51 projection's error moves with each atom: ``∂E/∂z_i`` ``[..., i]``, for sorted targets.

    ``E = ∫ (F(x) − F_Π(x))² dx`` is the squared Cramér distance between the target distribution (clamped into the
    support, as :func:`project_sorted` clamps it) and its projection onto the atoms ``z``, whose CDF ``F_Π`` is
    constant on each cell ``[z_i, z_(i+1))`` at the cell's mean of ``F``, ``M_i`` (the projection is the Cramér
    distance's orthogonal projection, Rowland et al. 2018). Each cell contributes
    ``∫_cell F² − (∫_cell F)² / (z_(i+1) − z_i)``; differentiating at ``z_i``, shared by the cells ``i − 1`` and
    ``i``, gives ``∂E/∂z_i = (F(z_i) − M_(i−1))² − (F(z_i) − M_i)²``: closed form, from the projection's own prefix
    sums, no autograd. The two end atoms get 0: they are the clamp bounds, which the atom spacing never moves.
    Returned in the targets' dtype; ``support`` broadcasts as in :func:`project_sorted`.
    """
    at_atoms, cumulative = _sorted_cdfs(target_atoms, target_probs, support)  # [..., i-1], [..., i]
    inner = at_atoms[..., 1:]  # F(z_i) at the interior atoms 1 .. i-2
    gradient = (inner - cumulative[..., :-2]) ** 2 - (inner - cumulative[..., 1:-1]) ** 2
    edge = torch.zeros_like(gradient[..., :1])
    return torch.cat([edge, gradient, edge], dim=-1).to(target_probs.dtype)


def quantile_huber(pred: torch.Tensor, target: torch.Tensor, taus: torch.Tensor, kappa: float) -> torch.Tensor:
    """Quantile-Huber loss per sample (Dabney et al., IQN eq. 10), summed over ``i``, averaged over ``j``.

    ``pred``: ``[..., i]`` quantile values at fractions ``taus`` ``[..., i]``;
    ``target``: ``[..., j]`` target samples. Returns ``[...]``.
    ``ρ(δ) = |τ - 1{δ<0}| · Huber_κ(δ) / κ`` with ``δ = target_j - pred_i``.
    """
    delta = target.unsqueeze(-2) - pred.unsqueeze(-1)  # [..., i, j]
    abs_delta = delta.abs()
    huber = torch.where(abs_delta <= kappa, 0.5 * delta * delta, kappa * (abs_delta - 0.5 * kappa))
    weight = (taus.unsqueeze(-1) - (delta.detach() < 0).to(delta.dtype)).abs()
    return (weight * huber / kappa).sum(-2).mean(-1)
