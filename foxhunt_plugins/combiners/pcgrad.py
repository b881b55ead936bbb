"""PCGrad (Yu et al. 2020, "Gradient surgery for multi-task learning"): conflicting directions projected away.

For each component ``i`` and each other component ``j`` in index order, if the
(so far projected) ``g_i`` conflicts with the original ``g_j`` (``g_i·g_j < 0``),
its component along ``g_j`` is removed: ``g_i ← g_i − (g_i·g_j / ‖g_j‖²) g_j``.
Each projected gradient is then clipped to its budget and the results summed,
like ``budgeted_sum``; a projection never lengthens a vector, so the budgets
still bound the sum by ``max_grad_norm``.

Two departures from the paper, both deliberate:

- **a fixed order** (component index order) instead of a random shuffle per
  step: a CPU run stays bit-reproducible from its seed, and the update draws no
  random numbers outside the learner's generator;
- **the work is on the ``[C, C]`` matrix of cosines**: the projections of row
  ``i`` are a linear combination of the unit gradients, so every dot product of
  the sequence is computed from that matrix, and only two ``[C, P]`` products
  touch the gradients. Working with unit vectors keeps the arithmetic finite for
  any finite gradient (no ‖g‖² to overflow).
"""

from __future__ import annotations

from typing import Any

import torch

from foxhunt import Combination, GradientCombiner, hookimpl

__all__ = ["NAME", "pcgrad_coefficients", "pcgrad", "foxhunt_gradient_combiners"]

NAME = "pcgrad"


def pcgrad_coefficients(cosines: torch.Tensor) -> torch.Tensor:
    """``[C, C]`` cosines of the component gradients -> ``M [C, C]`` with projected ``g_i / ‖g_i‖ = Σ_j M[i, j] u_j``.

    Row ``i`` starts as ``e_i``; for ``j`` in index order (``j ≠ i``) its dot with ``u_j`` is ``(M cosines)[i, j]``,
    and a negative one is subtracted along ``u_j``. All rows advance together, one ``j`` at a time.
    """
    count = cosines.shape[0]
    eye = torch.eye(count, device=cosines.device, dtype=cosines.dtype)
    coefficients = eye
    for j in range(count):  # C is the number of loss components: a handful, unrolled when compiled
        dots = coefficients @ cosines[:, j]  # [C]: each projected row against u_j
        conflict = (dots < 0) & (eye[:, j] == 0)
        coefficients = coefficients - torch.where(conflict, dots, torch.zeros_like(dots))[:, None] * eye[j][None, :]
    return coefficients


def pcgrad(flat: torch.Tensor, norms: torch.Tensor, losses: torch.Tensor, limits: torch.Tensor,
           parameters: torch.Tensor) -> Combination:
    """Project away conflicts, clip each projected gradient to its limit; ``flat [C, P]``, ``norms``/``limits [C]``."""
    # A zero gradient (or one whose norm under- or overflowed) has no direction: its unit row is zero, nothing is
    # projected off it and it contributes nothing. Dividing by the norm itself, not a floored one, keeps the
    # other rows exactly unit, so an antiparallel pair cancels to rounding.
    inverse = torch.where(torch.isfinite(norms) & (norms > 0), 1.0 / norms, torch.zeros_like(norms))
    units = flat * inverse[:, None]  # [C, P], rows of norm 1 (or 0)
    coefficients = pcgrad_coefficients(units @ units.T)  # [C, C]
    directions = coefficients @ units  # [C, P]: each projected gradient over its original norm
    shrink = directions.pow(2).sum(1).sqrt()  # [C], at most 1: projections only shorten
    # min(‖g‖, limit / shrink) × direction: the projected gradient, or its clip to the limit; a row with nothing
    # left (or no direction at all) contributes zero, never inf × 0
    scale = torch.where(shrink > 0, torch.minimum(norms, limits / shrink), torch.zeros_like(shrink))  # [C]
    return Combination(scale[:, None] * directions, scale * shrink)


@hookimpl
def foxhunt_gradient_combiners(config: Any) -> list[GradientCombiner]:
    return [
        GradientCombiner(
            name=NAME,
            combine=pcgrad,
            description="PCGrad: each component's gradient projected off the others it conflicts with "
                        "(fixed order), then clipped to its budget and summed",
        )
    ]
