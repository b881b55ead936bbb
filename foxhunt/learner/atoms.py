"""Where the C51 atoms sit inside each branch's support: evenly spaced, placed by the returns' quantiles, or learned.

Each branch's atoms span ``centre ± half_width`` (the ``support.center``/``support.half_width`` ISV slots). The
*unit shape* says where the N atoms sit inside that span, as N increasing numbers from −1 to +1:

- ``[learner] atom_spacing = "uniform"`` (the default): ``linspace(−1, 1, N)``, the same for every branch.
- ``"quantile"``: dense where the targets are. The learner hands the support kernel the batch quantiles of each
  branch's n-step target ``r + γ^m E[Z']`` at the five :class:`AtomKnot` levels (the ``learner.return_quantiles``
  signal); the kernel keeps a slow average of where they fall inside the support, as offsets from where an even
  spacing would put them (the ``support.knots`` slot, ``[Branch × AtomKnot]``, 0 = even). The knots, with −1 and
  +1 at the ends, define a piecewise-linear map from probability level to position; atom ``i`` goes where that
  map sends level ``i / (N − 1)``, so about as many atoms sit between two knots as the levels between them say.
  ``atom_spacing_mix`` of an even spacing is blended in, which keeps every gap positive (the projection needs a
  strictly increasing support) and keeps atoms in the tails, where the targets are few but the greedy action's
  value can go.
- ``"learned"``: the same knots and the same map, moved by gradient descent on the projection's error instead of
  toward the quantiles. The learner hands the support kernel :func:`knot_gradient` (the ``learner.knot_gradient``
  signal, ``[Branch, AtomKnot]``): how the squared Cramér distance between the n-step target distribution and its
  projection onto the atoms changes with each knot, averaged over the batch. The kernel takes a clipped step
  against it and keeps the knots sorted inside ``[−1, 1]`` (docs/adaptive.md, "support").

Why: an even spacing that spans the targets' whole range (±4 standard deviations by default) puts most atoms
where no target falls, so the distribution of a typical action is resolved by a handful of atoms near its
mean. Quantile spacing gives the bulk of the returns most of the atoms.

Every function here is pure and fixed-shape (static indices, no data-dependent control flow), so the compiled
and captured update can run it.
"""

from __future__ import annotations

import torch

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.contract import KNOT_EVEN_PLACES, KNOT_LEVELS
from foxhunt.errors import LayoutError
from foxhunt.learner.distributional import projection_error_gradient

__all__ = ["AtomShape", "batch_quantiles", "knot_gradient", "knot_interpolation", "quantile_unit"]

_BRANCHES = len(Branch)  # a Python int taken at import: the shape is computed inside the compiled update


def batch_quantiles(values: torch.Tensor, levels: tuple[float, ...] = KNOT_LEVELS) -> torch.Tensor:
    """``values [B, Branch]`` -> their quantiles over the batch ``[Branch, len(levels)]``.

    Linear interpolation between order statistics (numpy's default, "linear"): level ``p`` sits at sorted
    position ``p (B − 1)``. The positions depend on B alone, so the indices are Python constants.
    """
    ordered = values.detach().sort(dim=0).values  # [B, Branch]
    last = values.shape[0] - 1
    columns = []
    for level in levels:
        position = level * last
        low = int(position)
        high = min(low + 1, last)
        weight = position - low
        columns.append(ordered[low] * (1.0 - weight) + ordered[high] * weight)
    return torch.stack(columns, dim=-1)  # [Branch, K]


def knot_interpolation(n_atoms: int, levels: tuple[float, ...] = KNOT_LEVELS, *, dtype: torch.dtype = torch.float32,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """The fixed ``[N, K + 2]`` matrix that maps knot positions ``[−1, x_1 .. x_K, +1]`` to the N atoms' positions.

    Atom ``i`` sits at level ``u = i / (N − 1)``; between the two levels ``l_j ≤ u ≤ l_(j+1)`` of
    ``[0, levels.., 1]`` it is ``(1 − w) x_j + w x_(j+1)`` with ``w = (u − l_j) / (l_(j+1) − l_j)``. Row ``i`` holds
    those two weights.
    """
    edges = (0.0, *levels, 1.0)
    matrix = torch.zeros(n_atoms, len(edges), dtype=torch.float64)
    for i in range(n_atoms):
        u = i / (n_atoms - 1)
        j = max(k for k in range(len(edges) - 1) if edges[k] <= u)  # the interval [l_j, l_(j+1)] holding u
        j = min(j, len(edges) - 2)
        w = (u - edges[j]) / (edges[j + 1] - edges[j])
        matrix[i, j] += 1.0 - w
        matrix[i, j + 1] += w
    return matrix.to(dtype=dtype, device=device)


def quantile_unit(offsets: torch.Tensor, interpolation: torch.Tensor, even: torch.Tensor, uniform: torch.Tensor,
                  mix: float) -> torch.Tensor:
    """The unit shape ``[Branch, N]`` of the spacings placed by the knots (``"quantile"`` and ``"learned"``).

    ``offsets``: the ``support.knots`` slot, ``[Branch × K]`` (each knot's offset from its even position);
    ``interpolation``: :func:`knot_interpolation`'s ``[N, K + 2]``; ``even``: ``KNOT_EVEN_PLACES`` as a ``[K]``
    tensor; ``uniform``: ``linspace(−1, 1, N)``; ``mix``: the share of the even spacing blended in (> 0 keeps
    every gap at least ``2 mix / (N − 1)``).
    """
    knots = offsets.view(_BRANCHES, -1) + even  # [Branch, K], non-decreasing when the offsets came from sorted data
    ends = torch.ones(_BRANCHES, 1, dtype=knots.dtype, device=knots.device)
    placed = torch.cat([-ends, knots.clamp(-1.0, 1.0), ends], dim=1) @ interpolation.T  # [Branch, N]
    return mix * uniform + (1.0 - mix) * placed


def knot_gradient(target_atoms: torch.Tensor, target_probs: torch.Tensor, support: torch.Tensor,
                  interpolation: torch.Tensor, mix: float) -> torch.Tensor:
    """``[Branch, K]``: the gradient of the batch's projection error with respect to each knot offset.

    The error is the squared Cramér distance between each sample's target distribution (sorted ``target_atoms``
    with ``target_probs``, ``[B, Branch, N]``) and its projection onto ``support`` (``[Branch, N]`` shared or
    ``[B, Branch, N]`` per sample, as :func:`~foxhunt.learner.distributional.project_sorted` takes it), measured
    in the support's own units (divided by its half-width) and averaged over the batch, times ``N − 1`` so that
    its size does not depend on the atom count. An atom sits at ``centre + half_width × unit_i`` with
    ``unit = mix × even + (1 − mix) × [−1, knots, +1] @ interpolationᵀ``, so the chain to the knots is linear:
    ``(N − 1)(1 − mix) Σ_i ∂E/∂z_i × interpolation[i, 1 + k]`` (the half-width cancels). ``interpolation`` is
    :func:`knot_interpolation`'s ``[N, K + 2]``. A knot clamped at ±1 gets the gradient of an unclamped one: the
    support kernel keeps the knots inside the bounds itself.
    """
    per_atom = projection_error_gradient(target_atoms, target_probs, support).mean(0)  # [Branch, N]
    n_atoms = per_atom.shape[-1]
    return (n_atoms - 1) * (1.0 - mix) * (per_atom @ interpolation[:, 1:-1].to(per_atom.dtype))


class AtomShape:
    """The unit shape of a learner's or a saved policy's atoms under its ``[learner] atom_spacing``.

    Calling it gives ``linspace(−1, 1, N)`` ``[N]`` for ``"uniform"``, or :func:`quantile_unit` ``[Branch, N]``
    from the live ``support.knots`` view ``knots`` for ``"quantile"`` and ``"learned"`` (a kernel's write is seen by
    the next call, with no copy); either broadcasts against a ``[Branch, 1]`` half-width. A spacing placed by the
    knots without that slot is refused: it would silently be even.

    :meth:`signal` is what the update hands the support kernel for the spacing, under the name
    :attr:`signal_name`: the targets' batch quantiles (``"quantile"``), the knot gradient (``"learned"``), or
    nothing (``"uniform"``: the default update computes neither).
    """

    SIGNALS = {"quantile": contract.RETURN_QUANTILES, "learned": contract.KNOT_GRADIENT}

    def __init__(self, n_atoms: int, spacing: str, mix: float, knots: torch.Tensor | None, *,
                 dtype: torch.dtype, device: torch.device | str) -> None:
        self.uniform = torch.linspace(-1.0, 1.0, n_atoms, device=device, dtype=dtype)  # [N]
        self.spacing = spacing
        self.by_knots = spacing != "uniform"  # "quantile" and "learned" place the atoms by the knots
        self.signal_name = self.SIGNALS.get(spacing)
        self.knots = knots
        self.mix = mix
        if self.by_knots:
            if knots is None:
                raise LayoutError(f'[learner] atom_spacing = "{spacing}" places the atoms by the support.knots ISV '
                                  "slot, which no loaded plugin declares: enable the built-in support plugin (or one "
                                  'that declares and writes it), or set atom_spacing = "uniform"')
            self.interpolation = knot_interpolation(n_atoms, dtype=dtype, device=device)  # [N, K + 2]
            self.even = torch.tensor(KNOT_EVEN_PLACES, dtype=dtype, device=device)  # [K]

    def __call__(self) -> torch.Tensor:
        if not self.by_knots:  # fixed for the run: a static branch
            return self.uniform
        return quantile_unit(self.knots.to(self.uniform.dtype), self.interpolation, self.even, self.uniform,
                             self.mix)

    def signal(self, target_q: torch.Tensor, target_atoms: torch.Tensor, target_probs: torch.Tensor,
               support: torch.Tensor) -> torch.Tensor | None:
        """The update's signal for the support kernel under :attr:`signal_name`, or ``None`` for ``"uniform"``.

        ``target_q [B, Branch]`` the expected n-step targets; ``target_atoms``/``target_probs`` ``[B, Branch, N]``
        the target distribution before projection; ``support`` the atoms the C51 loss projects onto (``[Branch, N]``
        or ``[B, Branch, N]``). All in the update's normalised units. Static in the spacing (compiled code takes one
        branch for the run).
        """
        if self.spacing == "quantile":
            return batch_quantiles(target_q)
        if self.spacing == "learned":
            return knot_gradient(target_atoms.detach(), target_probs.detach(), support.detach(), self.interpolation,
                                 self.mix)
        return None
