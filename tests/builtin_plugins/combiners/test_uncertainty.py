"""Uncertainty weighting: the gradient of Σ exp(−s) L + s, by autograd, is what the combiner hands back."""

from __future__ import annotations

import torch
from gradient_strategies import ComponentGradients, component_gradients
from hypothesis import given

from foxhunt.learner import BUDGETED_SUM
from foxhunt_plugins.combiners.uncertainty import LOG_VARIANCE_BOUND, uncertainty_weighting


@given(component_gradients())
def test_at_zero_log_variance_it_is_the_budgeted_sum_bit_for_bit(case: ComponentGradients) -> None:
    norms = case.flat.pow(2).sum(1).sqrt()
    zeros = torch.zeros_like(case.log_variances)
    got = uncertainty_weighting(case.flat, norms, case.losses, case.limits, zeros)
    budgeted = BUDGETED_SUM.combine(case.flat, norms, case.losses, case.limits, zeros[:, :0])
    assert torch.equal(got.contributions, budgeted.contributions)
    assert torch.equal(got.norms, budgeted.norms)


def test_both_gradients_are_those_of_the_weighted_loss_by_autograd() -> None:
    torch.manual_seed(0)
    theta = torch.randn(6, dtype=torch.float64, requires_grad=True)
    targets = torch.randn(3, 6, dtype=torch.float64)
    s = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    losses = ((theta[None, :] - targets) ** 2).sum(1)  # [C]
    per_component = torch.stack([torch.autograd.grad(loss, theta, retain_graph=True)[0] for loss in losses])
    total = (torch.exp(-s) * losses + s).sum()
    theta_grad, s_grad = torch.autograd.grad(total, (theta, s))
    got = uncertainty_weighting(per_component, per_component.norm(dim=1), losses.detach(),
                                torch.full((3,), 1e6, dtype=torch.float64), s.detach()[:, None])
    torch.testing.assert_close(got.contributions.sum(0), theta_grad)
    torch.testing.assert_close(got.parameter_grad[:, 0], s_grad)


def test_a_log_variance_past_its_bound_stops_changing_the_weight() -> None:
    flat = torch.ones(2, 4)
    limits = torch.full((2,), 1e30)
    inside = uncertainty_weighting(flat, flat.norm(dim=1), torch.ones(2), limits,
                                   torch.full((2, 1), -LOG_VARIANCE_BOUND))
    beyond = uncertainty_weighting(flat, flat.norm(dim=1), torch.ones(2), limits, torch.full((2, 1), -1e4))
    assert torch.equal(inside.contributions, beyond.contributions)
    assert torch.isfinite(beyond.parameter_grad).all()
