"""Gradient combiners in the core: the default is the budget rule as it was, the safety clip bounds every combiner,
the selection refuses an unknown name, and a combiner's learned values are learner state."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gradient_strategies import ComponentGradients, as_parameters, component_gradients
from hypothesis import given

from foxhunt import Combination, GradientCombiner
from foxhunt.tooling.audit import parse_rows
from foxhunt.errors import ConfigError
from foxhunt.plugin.spec import hookimpl
from foxhunt.learner import BUDGETED_SUM, budgeted_sum, combine, declarations, select_combiner

SAFETY_SLACK = 1e-5


def budgeted_sum_before_combiners(stacked, limits, max_grad_norm):
    """``budgeted_sum`` as it was written before combiners existed, kept verbatim as the reference."""
    flat = torch.cat([g.reshape(g.shape[0], -1) for g in stacked], dim=1)
    norms = flat.pow(2).sum(1).sqrt()
    coef = torch.clamp(limits / (norms + 1e-12), max=1.0)
    combined = (coef[:, None] * flat).sum(0)
    total = combined.pow(2).sum().sqrt()
    fired = (total > max_grad_norm * (1.0 + SAFETY_SLACK)).to(torch.int64)
    scale = torch.clamp(max_grad_norm / (total + 1e-12), max=1.0)
    return combined * scale, norms, norms * coef, total, fired


@given(component_gradients())
def test_budgeted_sum_is_the_budget_rule_as_it_was_bit_for_bit(case: ComponentGradients) -> None:
    stacked = as_parameters(case.flat)
    expected = budgeted_sum_before_combiners(stacked, case.limits, case.max_grad_norm)
    for result in (budgeted_sum(stacked, case.limits, case.max_grad_norm),
                   combine(BUDGETED_SUM, stacked, case.losses, case.limits, case.log_variances[:, :0],
                           case.max_grad_norm)):
        got = (result.flat, result.component_norms, result.clipped_norms, result.combined_norm, result.safety_fired)
        for a, b in zip(got, expected, strict=True):
            assert torch.equal(a, b)
        assert result.parameter_grad is None


def _reckless(flat, norms, losses, limits, parameters) -> Combination:
    # ignores its budgets and amplifies: only the learner's safety clip stands between it and the optimiser
    contributions = flat * 1e3
    return Combination(contributions, norms * 1e3)


RECKLESS = GradientCombiner(name="reckless", combine=_reckless, description="ignores the budgets")


@given(component_gradients())
def test_the_safety_clip_bounds_a_combiner_that_ignores_its_budgets(case: ComponentGradients) -> None:
    result = combine(RECKLESS, as_parameters(case.flat), case.losses, case.limits, case.log_variances[:, :0],
                     case.max_grad_norm)
    assert torch.isfinite(result.flat).all()
    assert float(result.flat.double().norm()) <= case.max_grad_norm * (1 + SAFETY_SLACK)
    total = float(result.combined_norm)
    assert int(result.safety_fired) == int(total > case.max_grad_norm * (1 + SAFETY_SLACK))


def test_the_core_ships_the_audit_row_of_its_combiner_as_the_repository_lists_it() -> None:
    [shipped] = [row for row in parse_rows(declarations.FOXHUNT_AUDIT, "module") if row.name == "budgeted_sum"]
    table = Path(__file__).resolve().parents[2] / "docs" / "audits" / "components.md"
    [listed] = [row for row in parse_rows(table.read_text(encoding="utf-8"), "docs") if row.name == "budgeted_sum"]
    assert (shipped.kind, shipped.plugin, shipped.status, shipped.tests) == (
        listed.kind, listed.plugin, listed.status, listed.tests)


def test_an_unknown_combiner_is_refused_naming_the_available_ones() -> None:
    with pytest.raises(ConfigError, match=r"learner.combiner: 'pcgrd' .*available: budgeted_sum, reckless"):
        select_combiner([RECKLESS, BUDGETED_SUM], "pcgrd")
    assert select_combiner([RECKLESS, BUDGETED_SUM], "reckless") is RECKLESS


def test_the_learner_refuses_a_combiner_no_plugin_provides(make_learner, kit) -> None:
    with pytest.raises(ConfigError, match="available: budgeted_sum"):
        make_learner(kit.small_config(combiner="pcgrad"), fill=0)


def test_the_default_combiner_adds_no_state_and_no_optimised_parameter(make_learner) -> None:
    learner = make_learner(fill=0)
    assert learner.combiner is BUDGETED_SUM
    assert learner.optimized == learner.params
    assert not [name for name in learner.state_dict() if "combiner" in name]
    assert learner.registries.state.attached("learner.combiner") is learner.combiner_parameters


class _LearnsTowardOne:
    """A plugin whose combiner learns one value per component, with the gradient ``value − 1``."""

    @staticmethod
    def _combine(flat, norms, losses, limits, parameters) -> Combination:
        budgeted = BUDGETED_SUM.combine(flat, norms, losses, limits, parameters)
        return Combination(budgeted.contributions, budgeted.norms, parameters - 1.0)

    @staticmethod
    def foxhunt_gradient_combiners() -> list[GradientCombiner]:
        return [GradientCombiner(name="learned", combine=_LearnsTowardOne._combine, description="learns toward 1",
                                 parameters_per_component=1)]


def test_a_combiners_learned_values_are_optimised_saved_and_loaded(make_learner, kit) -> None:
    plugin = type("LearnedPlugin", (), {"foxhunt_gradient_combiners": hookimpl(_LearnsTowardOne.foxhunt_gradient_combiners)})
    learner = make_learner(kit.small_config(combiner="learned"), extra=[(plugin, "learned")])
    assert learner.combiner_parameters.shape == (len(learner.components), 1)
    assert learner.optimized[-1] is learner.combiner_parameters
    learner.step(16)
    moved = learner.combiner_parameters.detach().clone()
    assert (moved > 0).all()  # gradient −1 at zero: Adam moves each value up by about lr
    state = learner.state_dict()
    assert torch.equal(state["combiner.parameters"], moved)
    assert "optimizer.combiner.parameters.exp_avg" in state
    fresh = make_learner(kit.small_config(combiner="learned"), extra=[(plugin, "learned")], fill=0)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.combiner_parameters.detach(), moved)
