"""Gradient combiners: how the loss components' isolated gradients become the one the optimiser steps with.

A combiner (a :class:`~foxhunt.plugin.records.GradientCombiner` from the ``foxhunt_gradient_combiners`` hook) is a
pure function of the per-component gradients laid end to end ``[C, P]``, their norms, the losses and the
budget limits. It returns each component's *contribution*; :func:`combine` sums them and applies the one
safety clip every combiner shares, so the total never exceeds ``max_grad_norm`` whatever the combiner did
(invariant 9's guarantee, for every combiner), and counts a firing beyond rounding.

``budgeted_sum`` is the core's own combiner and the default: each gradient clipped to its budget
(:func:`budget_clip`) and summed. Budgets sum to 1, so the sum is within ``max_grad_norm`` by the triangle
inequality and the safety clip never fires. It lives here, not in a plugin, because it *is* the budget rule
the learner guarantees, and a run with every plugin disabled still needs one combiner; the learner's core
plugin (:mod:`foxhunt.learner.declarations`) returns it from the hook like any plugin would.

Other combiners are plugins (the built-in ``pcgrad`` and ``uncertainty``), selected by ``[learner]
combiner`` and checked when the run's plugins are frozen (:func:`select_combiner`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from foxhunt.learner.choice import select_choice, unknown_choice
from foxhunt.plugin.records import Combination, GradientCombiner

__all__ = ["CombinedGradient", "BUDGETED_SUM", "DEFAULT_COMBINER", "budget_clip", "combine",
           "flatten_gradients", "gradient_norms", "select_combiner", "unknown_combiner", "SAFETY_SLACK"]

SAFETY_SLACK = 1e-5  # rounding margin before a safety-clip firing is counted (the clip itself is exact)
NORM_FLOOR = 1e-12  # keeps a zero gradient's clip coefficient finite (it multiplies zeros)
DEFAULT_COMBINER = "budgeted_sum"


@dataclasses.dataclass(frozen=True)
class CombinedGradient:
    """The result of :func:`combine`: the final gradient ``flat [P]`` (every parameter's gradient end to end in
    parameter order), the device-tensor metrics, and the gradient of the combiner's parameters."""

    flat: torch.Tensor
    component_norms: torch.Tensor  # [C] before the combiner
    clipped_norms: torch.Tensor  # [C] each component's contribution
    combined_norm: torch.Tensor  # [] the contributions' sum, before the safety clip
    safety_fired: torch.Tensor  # [] int64, 1 when the safety clip fired
    parameter_grad: torch.Tensor | None = None  # [C, W]


def flatten_gradients(stacked: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per-parameter gradients ``[C, *params[i].shape]`` laid end to end: ``[C, P]`` (one reduction per norm)."""
    return torch.cat([g.reshape(g.shape[0], -1) for g in stacked], dim=1)


def gradient_norms(flat: torch.Tensor) -> torch.Tensor:
    """``[C, P] -> [C]`` Euclidean norm of each row."""
    return flat.pow(2).sum(1).sqrt()


def budget_clip(flat: torch.Tensor, norms: torch.Tensor, limits: torch.Tensor) -> Combination:
    """Each row of ``flat [C, P]`` (norms ``[C]``) scaled down to at most its limit ``[C]``; rows within it unchanged."""
    coef = torch.clamp(limits / (norms + NORM_FLOOR), max=1.0)  # [C]
    return Combination(coef[:, None] * flat, norms * coef)


def _budgeted_sum(flat: torch.Tensor, norms: torch.Tensor, losses: torch.Tensor, limits: torch.Tensor,
                  parameters: torch.Tensor) -> Combination:
    return budget_clip(flat, norms, limits)


BUDGETED_SUM = GradientCombiner(
    name="budgeted_sum",  # DEFAULT_COMBINER, written out: the audit hook reads component names as literals
    combine=_budgeted_sum,
    description="each component's gradient clipped to budget × max_grad_norm, then summed (invariant 9)",
)


def combine(combiner: GradientCombiner, stacked: Sequence[torch.Tensor], losses: torch.Tensor, limits: torch.Tensor,
            parameters: torch.Tensor, max_grad_norm: float) -> CombinedGradient:
    """``combiner`` over per-parameter gradients ``stacked[i] [C, *shape]``, summed, then the safety clip.

    Pure (no in-place writes, no host reads), so it runs inside a compiled update. The safety clip scales the
    sum to ``max_grad_norm`` when it is longer, for every combiner; with budgets that sum to 1 a combiner that
    keeps each contribution within its limit never makes it fire.
    """
    flat = flatten_gradients(stacked)  # [C, P]
    norms = gradient_norms(flat)  # [C]
    combination = combiner.combine(flat, norms, losses.detach(), limits, parameters.detach())
    combined = combination.contributions.sum(0)  # [P]
    total = combined.pow(2).sum().sqrt()
    fired = (total > max_grad_norm * (1.0 + SAFETY_SLACK)).to(torch.int64)
    scale = torch.clamp(max_grad_norm / (total + NORM_FLOOR), max=1.0)
    return CombinedGradient(combined * scale, norms, combination.norms, total, fired, combination.parameter_grad)


def unknown_combiner(combiners: Sequence[GradientCombiner], name: str) -> str | None:
    """Why ``name`` cannot be used (no loaded plugin provides it, the available ones listed), or None."""
    return unknown_choice(combiners, name, "a gradient combiner", "learner.combiner")


def select_combiner(combiners: Sequence[GradientCombiner], name: str) -> GradientCombiner:
    """The combiner called ``name``; a :class:`ConfigError` listing the available ones when no plugin provides it."""
    return select_choice(combiners, name, "a gradient combiner", "learner.combiner")
