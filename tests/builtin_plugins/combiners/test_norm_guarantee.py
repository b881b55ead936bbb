"""Every built-in combiner, on any finite gradients: a finite result within ``max_grad_norm``, without the safety
clip having to act (each keeps every contribution within its budget), and contributions that sum to the result."""

from __future__ import annotations

import pytest
import torch
from gradient_strategies import ComponentGradients, as_parameters, component_gradients
from hypothesis import given

from foxhunt.learner import BUDGETED_SUM, combine
from foxhunt_plugins.combiners import pcgrad, uncertainty

COMBINERS = {
    "budgeted_sum": BUDGETED_SUM,
    "pcgrad": pcgrad.foxhunt_gradient_combiners(None)[0],
    "uncertainty": uncertainty.foxhunt_gradient_combiners(None)[0],
}
ROUNDING = 1e-5  # float32 norms of sums of up to five clipped rows


@pytest.mark.parametrize("name", sorted(COMBINERS))
@given(case=component_gradients())
def test_the_result_is_finite_and_within_max_grad_norm(name: str, case: ComponentGradients) -> None:
    combiner = COMBINERS[name]
    parameters = case.log_variances[:, :combiner.parameters_per_component]
    result = combine(combiner, as_parameters(case.flat), case.losses, case.limits, parameters, case.max_grad_norm)
    assert torch.isfinite(result.flat).all()
    assert float(result.flat.double().norm()) <= case.max_grad_norm * (1 + ROUNDING)
    assert int(result.safety_fired) == 0
    assert (result.clipped_norms <= case.limits * (1 + ROUNDING)).all()
    if result.parameter_grad is not None:
        assert torch.isfinite(result.parameter_grad).all()
