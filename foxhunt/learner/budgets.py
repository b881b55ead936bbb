"""Gradient isolation and budgets (invariant 9).

Each loss component is differentiated on its own, and a gradient combiner
(:mod:`foxhunt.learner.combiners`) turns the isolated gradients into one. The
default, :func:`budgeted_sum`, clips each to ``budget × max_grad_norm`` and
sums them. Budgets over the enabled components sum to exactly 1, so by the
triangle inequality the combined norm is at most ``max_grad_norm`` and the
final safety clip every combiner shares never fires for it; the clip is kept
anyway, and every firing is counted in a device tensor.

:class:`GradientBudget` holds the live side: the limits, the flat gradient
buffer every ``p.grad`` views, and the metric tensors. Per-component gradients
come from one ``autograd.grad`` per component over the shared graph
(:meth:`GradientBudget.loop_gradients`, eager) or from ``torch.func``
(:mod:`foxhunt.learner.functional`, compiled); docs/learner.md compares them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from foxhunt.errors import BudgetError
from foxhunt.learner.combiners import BUDGETED_SUM, CombinedGradient, combine
from foxhunt.plugin.records import LossComponent

__all__ = ["resolve_budgets", "budgeted_sum", "split_flat", "GradientBudget", "BUDGET_TOLERANCE"]

BUDGET_TOLERANCE = 1e-9  # budgets are decimal fractions; their float sum may miss 1 by a few ulps


def resolve_budgets(components: Sequence[LossComponent], overrides: Mapping[str, float]) -> tuple[float, ...]:
    """Each component's budget (the ``[learner.budgets]`` override, else its default), validated to sum to 1."""
    names = [component.name for component in components]
    if not names:
        raise BudgetError("no loss components are enabled; enable at least one loss plugin (e.g. c51)")
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise BudgetError(
            f"[learner.budgets] names {', '.join(unknown)}, which no enabled loss component provides "
            f"(enabled: {', '.join(names)}); remove the key or enable its plugin"
        )
    budgets = tuple(float(overrides.get(c.name, c.budget)) for c in components)
    for name, budget in zip(names, budgets, strict=True):
        if not 0.0 < budget <= 1.0:
            raise BudgetError(f"loss component {name!r}: budget must be in (0, 1], got {budget}")
    total = math.fsum(budgets)
    if abs(total - 1.0) > BUDGET_TOLERANCE:
        terms = " + ".join(f"{n}={b:g}" for n, b in zip(names, budgets, strict=True))
        raise BudgetError(
            f"loss-component gradient budgets must sum to exactly 1 over the enabled components; "
            f"got {terms} = {total:.12g}. Adjust [learner.budgets] so they sum to 1"
        )
    return budgets


def budgeted_sum(stacked: Sequence[torch.Tensor], limits: torch.Tensor, max_grad_norm: float) -> CombinedGradient:
    """Clip each component's gradient to its limit, sum, safety-clip. ``stacked[i]`` is ``[K, *params[i].shape]``.

    The default combiner through :func:`~foxhunt.learner.combiners.combine`: pure (no in-place writes, no host
    reads), so it runs inside a compiled update too.
    """
    empty = limits.new_zeros(limits.shape[0], 0)  # budgeted_sum reads neither losses nor learned values
    return combine(BUDGETED_SUM, stacked, limits.new_zeros(limits.shape), limits, empty, max_grad_norm)


def split_flat(flat: torch.Tensor, shapes: Sequence[torch.Size]) -> list[torch.Tensor]:
    """Views of ``flat [..., P]`` in ``shapes`` (the inverse of laying gradients end to end)."""
    sizes = [math.prod(shape) for shape in shapes]
    return [part.view(*flat.shape[:-1], *shape) for part, shape in zip(torch.split(flat, sizes, -1), shapes, strict=True)]


class GradientBudget:
    """Turns K component losses into one budgeted gradient in each parameter's ``.grad``.

    Device-tensor metrics (overwritten every update, read by monitors outside the step):
    ``component_norms [K]`` pre-clip, ``clipped_norms [K]``, ``combined_norm []``,
    ``safety_clips []`` (a running count).
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], budgets: Sequence[float], max_grad_norm: float) -> None:
        self.params = list(params)
        self.max_grad_norm = float(max_grad_norm)
        device, dtype = self.params[0].device, self.params[0].dtype
        k = len(budgets)
        self.limits = torch.tensor(budgets, device=device, dtype=dtype) * self.max_grad_norm  # [K]
        self.component_norms = torch.zeros(k, device=device, dtype=dtype)
        self.clipped_norms = torch.zeros(k, device=device, dtype=dtype)
        self.combined_norm = torch.zeros((), device=device, dtype=dtype)
        self.safety_clips = torch.zeros((), device=device, dtype=torch.int64)
        # every p.grad is a view of one flat buffer: no allocation per step, stable addresses for graphs,
        # and storing an update's gradient is one copy
        self.flat_grad = torch.zeros(sum(p.numel() for p in self.params), device=device, dtype=dtype)
        for p, grad in zip(self.params, split_flat(self.flat_grad, [p.shape for p in self.params]), strict=True):
            p.grad = grad

    def loop_gradients(self, losses: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Per-component gradients by one ``autograd.grad`` each, stacked ``[K, *param.shape]`` per parameter."""
        last = len(losses) - 1
        per_component = [
            torch.autograd.grad(loss, self.params, retain_graph=k < last, allow_unused=True, materialize_grads=True)
            for k, loss in enumerate(losses)
        ]
        return [torch.stack(grads) for grads in zip(*per_component, strict=True)]

    @torch.no_grad()
    def store(self, result: CombinedGradient) -> None:
        """Copy a :func:`~foxhunt.learner.combiners.combine` result into ``p.grad`` and the metric tensors (in place: stable addresses)."""
        self.flat_grad.copy_(result.flat)
        self.component_norms.copy_(result.component_norms)
        self.clipped_norms.copy_(result.clipped_norms)
        self.combined_norm.copy_(result.combined_norm)
        self.safety_clips.add_(result.safety_fired)

    def apply(self, losses: Sequence[torch.Tensor]) -> None:
        """Isolate (loop), clip to budget, sum, safety-clip; leaves the result in ``p.grad``."""
        with torch.no_grad():
            self.store(budgeted_sum(self.loop_gradients(losses), self.limits, self.max_grad_norm))
