"""Gradient budgets (invariant 9): validation, per-component clipping, the combined bound, the safety clip."""

from __future__ import annotations

import pytest
import torch

from foxhunt.errors import BudgetError
from foxhunt.learner import GradientBudget, budgeted_sum, resolve_budgets, split_flat
from foxhunt.learner.functional import FunctionalGradients
from foxhunt.plugin.records import LossComponent


def component(name: str, budget: float) -> LossComponent:
    return LossComponent(name=name, budget=budget, loss=lambda inputs: inputs, description=f"{name} test loss")


def test_budgets_not_summing_to_one_name_components_and_sum() -> None:
    comps = [component("c51", 0.5), component("mse", 0.3), component("cql", 0.1)]
    with pytest.raises(BudgetError) as error:
        resolve_budgets(comps, {})
    message = str(error.value)
    assert "c51=0.5" in message and "mse=0.3" in message and "cql=0.1" in message
    assert "0.9" in message
    with pytest.raises(BudgetError, match=r"cql=0.4 \+ iqn=0.4 = 1.6"):
        resolve_budgets(comps + [component("iqn", 0.4)], {"iqn": 0.4, "cql": 0.4})


def test_overrides_replace_defaults_and_unknown_names_are_rejected() -> None:
    comps = [component("c51", 0.5), component("mse", 0.5)]
    assert resolve_budgets(comps, {"c51": 0.7, "mse": 0.3}) == (0.7, 0.3)
    with pytest.raises(BudgetError, match="iqn.*enabled: c51, mse"):
        resolve_budgets(comps, {"iqn": 0.1})
    with pytest.raises(BudgetError, match="no loss components"):
        resolve_budgets([], {})


def test_decimal_budgets_that_sum_to_one_are_accepted() -> None:
    names = ["a", "b", "c", "d", "e", "f", "g"]
    budgets = [0.1, 0.2, 0.1, 0.15, 0.15, 0.2, 0.1]
    assert resolve_budgets([component(n, b) for n, b in zip(names, budgets, strict=True)], {}) == tuple(budgets)


def isolated_setup() -> tuple[list[torch.nn.Parameter], list[torch.Tensor], GradientBudget, list[float]]:
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 4, generator=g)), torch.nn.Parameter(torch.randn(4, generator=g))]
    x = torch.randn(8, 4, generator=g)
    budgets = [0.5, 0.3, 0.2]
    # three losses with very different gradient scales, sharing parameters
    losses = [
        1e3 * ((x @ params[0].T) ** 2).mean(),
        (params[1] * x).sum().abs() * 50,
        1e-4 * (params[0].sum() + params[1].sum()),
    ]
    return params, losses, GradientBudget(params, budgets, max_grad_norm=2.0), budgets


def test_each_component_clipped_to_its_budget_and_combined_within_max() -> None:
    params, losses, budget, fractions = isolated_setup()
    separate = [torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True, materialize_grads=True)
                for loss in losses]
    budget.apply(losses)
    for k, grads in enumerate(separate):
        norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
        torch.testing.assert_close(budget.component_norms[k], norm)
        assert float(budget.clipped_norms[k]) <= fractions[k] * 2.0 * (1 + 1e-6)
    # the first two are far over budget: clipped exactly to it; the third is under: untouched
    torch.testing.assert_close(budget.clipped_norms[:2], torch.tensor([1.0, 0.6]))
    torch.testing.assert_close(budget.clipped_norms[2], budget.component_norms[2])
    # the result is the sum of the individually clipped gradients (no mixing before the clip)
    expected = [sum(float(budget.clipped_norms[k] / budget.component_norms[k]) * separate[k][i] for k in range(3))
                for i in range(2)]
    for p, e in zip(params, expected, strict=True):
        torch.testing.assert_close(p.grad, e)
    total = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in params]))
    assert float(total) <= 2.0 * (1 + 1e-6)
    assert int(budget.safety_clips) == 0


def test_budgeted_sum_of_vmapped_gradients_equals_the_loop() -> None:
    """The batched mode's gradients (one torch.func.vjp, vmapped over one-hot cotangents) give the loop's result."""
    params, losses, budget, _ = isolated_setup()
    budget.apply(losses)
    looped = [p.grad.clone() for p in params]

    def stacked_losses(p0: torch.Tensor, p1: torch.Tensor) -> torch.Tensor:
        g = torch.Generator().manual_seed(0)
        torch.randn(5, 4, generator=g), torch.randn(4, generator=g)  # same draws as isolated_setup
        x = torch.randn(8, 4, generator=g)
        return torch.stack([1e3 * ((x @ p0.T) ** 2).mean(), (p1 * x).sum().abs() * 50, 1e-4 * (p0.sum() + p1.sum())])

    _, vjp = torch.func.vjp(stacked_losses, *(p.detach() for p in params))
    stacked = torch.vmap(vjp)(torch.eye(3))
    result = budgeted_sum(list(stacked), budget.limits, budget.max_grad_norm)
    for a, b in zip(looped, split_flat(result.flat, [p.shape for p in params]), strict=True):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(result.component_norms, budget.component_norms)


def test_safety_clip_counts_when_budgets_are_bypassed() -> None:
    """The count is live: forcing limits above max_grad_norm makes the safety clip fire (and clip)."""
    params, losses, budget, _ = isolated_setup()
    budget.limits.fill_(100.0)
    budget.apply(losses)
    assert int(budget.safety_clips) == 1
    total = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in params]))
    torch.testing.assert_close(total, torch.tensor(2.0))


def test_learner_updates_respect_budgets_and_never_safety_clip(make_learner) -> None:
    learner = make_learner(max_grad_norm=0.05)  # small: every component clips
    for _ in range(6):
        learner.step(64)
        metrics = learner.metrics()
        for comp, fraction in zip(learner.components, learner.budgets, strict=True):
            assert float(metrics[f"grad_norm_clipped.{comp.name}"]) <= fraction * 0.05 * (1 + 1e-5)
            assert float(metrics[f"grad_norm.{comp.name}"]) > fraction * 0.05
        assert float(metrics["grad_norm.combined"]) <= 0.05 * (1 + 1e-5)
    assert int(learner.metrics()["grad.safety_clips"]) == 0


def test_functional_gradients_equal_the_autograd_loop_under_any_grouping(make_learner) -> None:
    """The torch.func form that compiled updates run gives the eager loop's budgeted gradient (float64):
    grouped by reach (what the compiled update uses), all in one group, one component per group."""
    learner = make_learner(dtype=torch.float64)
    batch = learner.sample(32)
    support = learner.support()
    targets = learner.normalised_targets(batch, support, learner._taus(32, learner.config.n_target_quantiles))
    taus = learner._taus(32, learner.config.n_quantiles)
    reference = learner.loop_gradients(batch, support, taus, targets)
    groups = learner.reach_groups()
    assert [[learner.components[k].name for k in group] for group in groups] == [["c51", "mse", "cql"], ["iqn"], ["ensemble"]]
    for grouping in (groups, [tuple(range(len(learner.components)))], [(k,) for k in range(len(learner.components))]):
        functional = FunctionalGradients(learner.network, learner.components, learner.priority_component,
                                         learner.gradients.limits, learner.config.max_grad_norm, learner.input_sources,
                                         grouping)
        step = functional(learner.param_dict, batch, support, taus, targets)
        torch.testing.assert_close(reference.budgeted.flat, step.budgeted.flat, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(reference.losses, step.losses)
        torch.testing.assert_close(reference.per_sample, step.per_sample)
        torch.testing.assert_close(reference.branch_grad_norm, step.branch_grad_norm)
