"""Gradient isolation and budgets (invariant 9).

Each loss component is differentiated on its own, its gradient clipped to
``budget × max_grad_norm``, and the clipped gradients are summed. Budgets over
the enabled components sum to exactly 1, so by the triangle inequality the
combined norm is at most ``max_grad_norm`` and the optimiser's final safety clip
never fires; it is kept anyway, and every firing is counted in a device tensor.

Two ways to get per-component gradients, same result:

- ``loop``: one ``autograd.grad`` per component over the shared graph
  (``retain_graph``). Each pass only walks the part of the graph its loss
  reaches (the IQN loss never touches the C51 heads).
- ``batched``: one ``autograd.grad`` of the stacked losses with
  ``grad_outputs = I_K`` and ``is_grads_batched=True`` (vmap over the backward);
  one pass, but every pass walks the whole graph.

``benchmarks/learner.py`` measures both; ``loop`` is the default (docs/learner.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from foxhunt.errors import BudgetError
from foxhunt.records import LossComponent

__all__ = ["resolve_budgets", "GradientBudget", "BUDGET_TOLERANCE"]

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


class GradientBudget:
    """Turns K component losses into one budgeted gradient in each parameter's ``.grad``.

    Device-tensor metrics (overwritten every update, read by monitors outside the step):
    ``component_norms [K]`` pre-clip, ``clipped_norms [K]``, ``combined_norm []``,
    ``safety_clips []`` (a running count).
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], budgets: Sequence[float], max_grad_norm: float,
                 mode: str) -> None:
        if mode not in ("loop", "batched"):
            raise ValueError(f"grad_mode must be 'loop' or 'batched', got {mode!r}")
        self.params = list(params)
        self.mode = mode
        self.max_grad_norm = float(max_grad_norm)
        device, dtype = self.params[0].device, self.params[0].dtype
        k = len(budgets)
        self.limits = torch.tensor(budgets, device=device, dtype=dtype) * self.max_grad_norm  # [K]
        self.eye = torch.eye(k, device=device, dtype=dtype)
        self.component_norms = torch.zeros(k, device=device, dtype=dtype)
        self.clipped_norms = torch.zeros(k, device=device, dtype=dtype)
        self.combined_norm = torch.zeros((), device=device, dtype=dtype)
        self.safety_clips = torch.zeros((), device=device, dtype=torch.int64)
        for p in self.params:  # grads live in fixed buffers: no allocation per step, stable addresses for graphs
            p.grad = torch.zeros_like(p)

    def reset(self) -> None:
        self.safety_clips.zero_()

    def _component_grads(self, losses: Sequence[torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
        if self.mode == "batched":
            stacked = torch.stack(list(losses))
            batched = torch.autograd.grad(stacked, self.params, grad_outputs=self.eye, is_grads_batched=True,
                                          allow_unused=True, materialize_grads=True)
            return [tuple(g[k] for g in batched) for k in range(len(losses))]
        last = len(losses) - 1
        return [
            torch.autograd.grad(loss, self.params, retain_graph=k < last, allow_unused=True, materialize_grads=True)
            for k, loss in enumerate(losses)
        ]

    def apply(self, losses: Sequence[torch.Tensor]) -> None:
        """Isolate, clip to budget, sum, safety-clip; leaves the result in ``p.grad``."""
        grads = [p.grad for p in self.params]
        torch._foreach_zero_(grads)
        for k, component in enumerate(self._component_grads(losses)):
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(component)))
            coef = torch.clamp(self.limits[k] / (norm + 1e-12), max=1.0)
            self.component_norms[k] = norm
            self.clipped_norms[k] = norm * coef
            torch._foreach_add_(grads, torch._foreach_mul(component, coef))
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        self.combined_norm.copy_(total)
        self.safety_clips.add_((total > self.max_grad_norm * (1.0 + SAFETY_SLACK)).to(torch.int64))
        torch._foreach_mul_(grads, torch.clamp(self.max_grad_norm / (total + 1e-12), max=1.0))
