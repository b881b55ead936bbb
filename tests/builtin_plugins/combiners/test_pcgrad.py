"""PCGrad against a float64 reference written out as in Yu et al. 2020 (with the fixed order the plugin uses)."""

from __future__ import annotations

import torch
from gradient_strategies import ComponentGradients, component_gradients
from hypothesis import given

from foxhunt_plugins.combiners.pcgrad import pcgrad


def reference_pcgrad(gradients: torch.Tensor) -> torch.Tensor:
    """``[C, P]`` float64 -> the projected gradients ``[C, P]``: for each i, each other j in index order, if
    g_i·g_j < 0 then g_i -= (g_i·g_j) / ‖g_j‖² g_j, with g_j the original gradient."""
    projected = gradients.clone()
    for i in range(gradients.shape[0]):
        for j in range(gradients.shape[0]):
            if i == j:
                continue
            dot = float(projected[i] @ gradients[j])
            if dot < 0:
                projected[i] -= dot / float(gradients[j] @ gradients[j]) * gradients[j]
    return projected


@given(component_gradients(dtype=torch.float64))
def test_the_projections_match_the_plain_float64_reference(case: ComponentGradients) -> None:
    flat = case.flat
    unclipped = torch.full_like(case.limits, float("inf"))
    got = pcgrad(flat, flat.norm(dim=1), case.losses, unclipped, case.log_variances[:, :0])
    expected = reference_pcgrad(flat)
    # rounding is relative to the largest input (an antiparallel pair cancels to that, not to zero)
    tolerance = 1e-12 * float(flat.norm(dim=1).max())
    torch.testing.assert_close(got.contributions, expected, rtol=1e-9, atol=tolerance)
    torch.testing.assert_close(got.norms, expected.norm(dim=1), rtol=1e-9, atol=tolerance)


@given(component_gradients(dtype=torch.float64))
def test_each_projected_gradient_is_clipped_to_its_limit_and_no_further(case: ComponentGradients) -> None:
    flat, norms = case.flat, case.flat.norm(dim=1)
    unclipped = pcgrad(flat, norms, case.losses, torch.full_like(case.limits, float("inf")), case.log_variances[:, :0])
    got = pcgrad(flat, norms, case.losses, case.limits, case.log_variances[:, :0])
    coefficient = torch.clamp(case.limits / unclipped.norms.clamp(min=1e-300), max=1.0)
    torch.testing.assert_close(got.contributions, unclipped.contributions * coefficient[:, None],
                               rtol=1e-9, atol=1e-9 * float(case.limits.max()))


def test_antiparallel_gradients_cancel_and_orthogonal_ones_are_kept() -> None:
    a = torch.tensor([3.0, 4.0, 0.0])
    b = torch.tensor([0.0, 0.0, 2.0])
    flat = torch.stack([a, -a, b])
    limits = torch.full((3,), 100.0)
    got = pcgrad(flat, flat.norm(dim=1), torch.zeros(3), limits, torch.zeros(3, 0))
    torch.testing.assert_close(got.contributions, torch.stack([torch.zeros(3), torch.zeros(3), b]))


def test_a_worked_example_in_the_fixed_order() -> None:
    flat = torch.tensor([[1.0, 1.0], [-1.0, 0.0], [2.0, 1.0]])
    got = pcgrad(flat, flat.norm(dim=1), torch.zeros(3), torch.full((3,), 100.0), torch.zeros(3, 0))
    # row 0 conflicts with row 1 only: (1, 1) - (1, 0) = (0, 1);
    # row 1 with row 0: (-1, 0) + ½(1, 1) = (-0.5, 0.5), which then conflicts with row 2: + ⅒(2, 1) = (-0.3, 0.6);
    # row 2 agrees with row 0 and conflicts with row 1: (2, 1) - 2(1, 0) = (0, 1)
    expected = torch.tensor([[0.0, 1.0], [-0.3, 0.6], [0.0, 1.0]])
    torch.testing.assert_close(got.contributions, expected)
    torch.testing.assert_close(got.contributions, reference_pcgrad(flat.double()).float())
