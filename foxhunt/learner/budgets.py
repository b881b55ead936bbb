"""Gradient isolation and budgets (invariant 9).

Each loss component is differentiated on its own, its gradient clipped to
``budget × max_grad_norm``, and the clipped gradients are summed. Budgets over
the enabled components sum to exactly 1, so by the triangle inequality the
combined norm is at most ``max_grad_norm`` and the optimiser's final safety clip
never fires; it is kept anyway, and every firing is counted in a device tensor.

:func:`budgeted_sum` is that rule as one pure function of the stacked
per-component gradients (``[K, *param.shape]`` per parameter). Two ways feed it:

- ``loop`` (:meth:`GradientBudget.apply`): one ``autograd.grad`` per component
  over the shared graph (``retain_graph``). Each pass only walks the part of the
  graph its loss reaches (the IQN loss never touches the C51 heads).
- ``batched`` (:mod:`foxhunt.learner.functional`): one ``torch.func.vjp`` of the
  stacked losses, vmapped over the K one-hot cotangents; one pass that walks the
  whole graph for every component, and the form ``torch.compile`` can trace.

``benchmarks/learner.py`` measures both (docs/learner.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import torch

from foxhunt.errors import BudgetError
from foxhunt.records import LossComponent

__all__ = ["resolve_budgets", "budgeted_sum", "split_flat", "BudgetedGradient", "GradientBudget", "BUDGET_TOLERANCE"]

BUDGET_TOLERANCE = 1e-9  # budgets are decimal fractions; their float sum may miss 1 by a few ulps
SAFETY_SLACK = 1e-5  # rounding margin before a safety-clip firing is counted (the clip itself is exact)


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


@dataclasses.dataclass(frozen=True)
class BudgetedGradient:
    """The result of :func:`budgeted_sum`: the final gradient, flat, and the device-tensor metrics.

    ``flat [P]`` is every parameter's gradient end to end in parameter order
    (:func:`split_flat` gives them back in their shapes).
    """

    flat: torch.Tensor
    component_norms: torch.Tensor  # [K] pre-clip
    clipped_norms: torch.Tensor  # [K]
    combined_norm: torch.Tensor  # [] after the budget clips, before the safety clip
    safety_fired: torch.Tensor  # [] int64, 1 when the safety clip fired


def budgeted_sum(stacked: Sequence[torch.Tensor], limits: torch.Tensor, max_grad_norm: float) -> BudgetedGradient:
    """Clip each component's gradient to its limit, sum, safety-clip. ``stacked[i]`` is ``[K, *params[i].shape]``.

    Pure (no in-place writes, no host reads), so it runs inside a compiled update too. The
    gradients are laid end to end first (``[K, P]``): every norm and sum is then one
    reduction over all parameters, not one per parameter.
    """
    flat = torch.cat([g.reshape(g.shape[0], -1) for g in stacked], dim=1)  # [K, P]
    norms = flat.pow(2).sum(1).sqrt()  # [K]
    coef = torch.clamp(limits / (norms + 1e-12), max=1.0)  # [K]
    combined = (coef[:, None] * flat).sum(0)  # [P]
    total = combined.pow(2).sum().sqrt()
    fired = (total > max_grad_norm * (1.0 + SAFETY_SLACK)).to(torch.int64)
    scale = torch.clamp(max_grad_norm / (total + 1e-12), max=1.0)
    return BudgetedGradient(combined * scale, norms, norms * coef, total, fired)


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
    def store(self, result: BudgetedGradient) -> None:
        """Copy a :func:`budgeted_sum` result into ``p.grad`` and the metric tensors (in place: stable addresses)."""
        self.flat_grad.copy_(result.flat)
        self.component_norms.copy_(result.component_norms)
        self.clipped_norms.copy_(result.clipped_norms)
        self.combined_norm.copy_(result.combined_norm)
        self.safety_clips.add_(result.safety_fired)

    def apply(self, losses: Sequence[torch.Tensor]) -> None:
        """Isolate (loop), clip to budget, sum, safety-clip; leaves the result in ``p.grad``."""
        with torch.no_grad():
            self.store(budgeted_sum(self.loop_gradients(losses), self.limits, self.max_grad_norm))
