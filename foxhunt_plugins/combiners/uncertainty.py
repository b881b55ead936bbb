"""Uncertainty weighting (Kendall, Gal and Cipolla 2018): each loss weighed by a learned precision.

The total loss is ``Σ_c exp(−s_c) L_c + s_c`` with one learned log-variance
``s_c`` per component, starting at 0 (weight 1). How it fits foxhunt's
per-component gradients, which are isolated before anything is combined:

- **The network's gradient** of that loss is ``Σ_c exp(−s_c) ∇L_c``: the
  combiner weighs each isolated gradient by ``w_c = exp(−s_c)`` and then clips
  the weighted gradient to its budget, so the budgets (and the safety clip) bound
  the sum by ``max_grad_norm`` as for every combiner. The weight is applied as
  ``min(w_c, limit_c / ‖g_c‖)``, the same product without forming ``w_c g_c``,
  so a large weight on a large gradient cannot overflow.
- **The log-variances' gradient** is ``∂/∂s_c = 1 − exp(−s_c) L_c``, in closed
  form from the component's loss: no second backward pass, and the losses are
  computed once as they are for every combiner. It is handed back as the
  combiner's parameter gradient; the learner's optimiser steps ``s`` with the
  network (the learned values are the learner's ``learner.combiner`` state,
  training-persist, saved in checkpoints). At its fixed point ``s_c = ln L_c``:
  each loss is weighed by the inverse of its own size.

The learned log-variance is held in ``[−LOG_VARIANCE_BOUND, LOG_VARIANCE_BOUND]``
where it sets the weight (past the bound the weight stops changing and the
gradient is the prior's 1 alone), so neither the weight nor the gradient can
overflow on a run that drives a loss to zero.

A budget clip that binds hides the weight: a component whose weighted gradient
is longer than its limit contributes its limit whatever ``w_c`` is, so the
weights act only on the components inside their budgets.
"""

from __future__ import annotations

from typing import Any

import torch

from foxhunt import Combination, GradientCombiner, hookimpl

__all__ = ["NAME", "LOG_VARIANCE_BOUND", "uncertainty_weighting", "foxhunt_gradient_combiners"]

NAME = "uncertainty"
LOG_VARIANCE_BOUND = 20.0  # weights within [2e-9, 5e8]: past that a loss is ignored or dominates anyway
NORM_FLOOR = 1e-12  # a zero gradient stays zero (its clip coefficient is finite)


def uncertainty_weighting(flat: torch.Tensor, norms: torch.Tensor, losses: torch.Tensor, limits: torch.Tensor,
                          log_variances: torch.Tensor) -> Combination:
    """``flat [C, P]`` weighed by ``exp(−s) [C]`` and clipped to ``limits [C]``; ``log_variances [C, 1]`` is ``s``."""
    s = log_variances[:, 0].clamp(-LOG_VARIANCE_BOUND, LOG_VARIANCE_BOUND)  # [C]
    weights = torch.exp(-s)  # [C]
    scale = torch.minimum(weights, limits / (norms + NORM_FLOOR))  # [C]: w g, clipped to its limit
    parameter_grad = (1.0 - weights * losses)[:, None]  # [C, 1]: ∂(exp(−s) L + s)/∂s
    return Combination(scale[:, None] * flat, scale * norms, parameter_grad)


@hookimpl
def foxhunt_gradient_combiners(config: Any) -> list[GradientCombiner]:
    return [
        GradientCombiner(
            name=NAME,
            combine=uncertainty_weighting,
            description="uncertainty weighting: each component's gradient weighed by exp(−s), s a learned "
                        "log-variance (loss exp(−s) L + s), then clipped to its budget and summed",
            parameters_per_component=1,
        )
    ]
