"""The loss plugins as plugins: records, default budgets, config overrides, ISV reads, and a new loss
added with nothing but a plugin."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from foxhunt.errors import BudgetError
from foxhunt.plugin.spec import hookimpl
from foxhunt.learner import LearnerConfig, LossInputs
from foxhunt.learner.slots import CQL_ALPHA, HEALTH
from foxhunt.plugin.records import LossComponent
from foxhunt.state import ResetCategory
from foxhunt_plugins.losses import c51, cql, ensemble, iqn, mse

MODULES = (c51, mse, cql, iqn, ensemble)


def test_each_module_is_one_plugin_with_one_component(kit) -> None:
    for module in MODULES:
        host, _ = kit.frozen_host(losses=(module,))
        components = host.loss_components(LearnerConfig())
        assert len(components) == 1
        (component,) = components
        assert isinstance(component, LossComponent)
        assert component.name == module.NAME
        assert component.budget == module.DEFAULT_BUDGET


def test_default_budgets_sum_to_exactly_one(kit) -> None:
    host, _ = kit.frozen_host()
    budgets = [c.budget for c in host.loss_components(LearnerConfig())]
    assert len(budgets) == 5
    assert math.fsum(budgets) == 1.0


def test_budget_overrides_and_a_disabled_component(make_learner) -> None:
    learner = make_learner(budgets={"c51": 0.5, "iqn": 0.1})
    assert dict(zip([c.name for c in learner.components], learner.budgets, strict=True))["c51"] == 0.5
    with pytest.raises(BudgetError, match=r"c51=0.4 \+ mse=0.15 \+ cql=0.1 \+ iqn=0.2 = 0.85"):
        make_learner(losses=(c51, mse, cql, iqn))
    learner = make_learner(losses=(c51, mse, cql, iqn), budgets={"c51": 0.55})
    learner.step(16)


def test_c51_label_smoothing_rises_as_health_falls(make_learner) -> None:
    learner = make_learner(settings={"c51": {"label_smoothing_max": 0.5}})
    inputs = dataclasses.replace(learner.loss_inputs(learner.sample(32)), health=torch.zeros(1))
    component = next(c for c in learner.components if c.name == "c51")
    torch.testing.assert_close(component.loss(inputs), c51.c51_loss(inputs, label_smoothing_max=0.5))
    assert not torch.allclose(component.loss(inputs), c51.c51_loss(inputs))  # not the default 0.1
    healthy = c51.c51_per_branch(dataclasses.replace(inputs, health=torch.ones(1)), 0.5)
    sick = c51.c51_per_branch(dataclasses.replace(inputs, health=torch.zeros(1)), 0.5)
    half = c51.c51_per_branch(dataclasses.replace(inputs, health=torch.full((1,), 0.5)), 0.5)
    # cross-entropy is linear in the target: half health is exactly halfway
    torch.testing.assert_close(half, 0.5 * (healthy + sick))
    uniform_ce = -inputs.taken(inputs.online.log_probs).mean(-1)
    torch.testing.assert_close(sick, 0.5 * healthy + 0.5 * uniform_ce)
    assert HEALTH in next(c for c in learner.components if c.name == "c51").reads


class SlotOwner:
    def __init__(self, name: str, init: float) -> None:
        self.name, self.init = name, init

    @hookimpl
    def foxhunt_declare(self, registrar) -> None:
        registrar.slot(self.name, init=self.init)
        registrar.state(self.name, ResetCategory.FOLD_RESET)


def test_cql_alpha_comes_from_the_isv_when_declared(make_learner) -> None:
    learner = make_learner(extra=[(SlotOwner(CQL_ALPHA, 2.0), "adaptive")])
    inputs = learner.loss_inputs(learner.sample(32))
    q = inputs.online.q
    gap = torch.logsumexp(q, -1) - inputs.taken(q)
    expected = 2.0 * (gap.mean(-1) * inputs.batch.weights).mean()
    torch.testing.assert_close(cql.cql_loss(inputs), expected)
    learner.isv.write(CQL_ALPHA, 0.0)
    assert float(cql.cql_loss(learner.loss_inputs(learner.sample(32))).detach()) == 0.0


def test_ensemble_loss_is_fit_plus_reduced_spread(make_learner) -> None:
    learner = make_learner(settings={"ensemble": {"diversity": 0.25}}, dtype=torch.float64)
    inputs = learner.loss_inputs(learner.sample(32))
    component = next(c for c in learner.components if c.name == "ensemble")
    q = inputs.taken(inputs.online.ensemble.transpose(0, 1), action_dim=3)  # [B, K, Branch]
    mean = q.mean(1)
    per = 0.5 * (mean - inputs.target_q) ** 2 + 0.75 * 0.5 * q.var(1, unbiased=False)
    torch.testing.assert_close(component.loss(inputs), inputs.batch_mean(inputs.branch_mean(per)))


class L2Plugin:
    """A new loss, added by a plugin only: a small L2 pull of the expected Q toward zero."""

    @staticmethod
    def l2_loss(inputs: LossInputs) -> torch.Tensor:
        return inputs.batch_mean(inputs.branch_mean(inputs.taken(inputs.online.q) ** 2))

    @hookimpl
    def foxhunt_loss_components(self, config) -> list[LossComponent]:
        return [LossComponent(name="test.l2", budget=0.05, loss=self.l2_loss, description="L2 on expected Q")]


def test_a_new_loss_needs_only_a_plugin(make_learner) -> None:
    budgets = {"c51": 0.35, "iqn": 0.2, "mse": 0.15, "ensemble": 0.15, "cql": 0.1, "test.l2": 0.05}
    learner = make_learner(budgets=budgets, extra=[(L2Plugin(), "test-l2")])
    assert [c.name for c in learner.components][-1] == "test.l2"
    learner.step(32)
    metrics = learner.metrics()
    assert float(metrics["grad_norm.test.l2"]) > 0
    assert float(metrics["grad_norm_clipped.test.l2"]) <= 0.05 * learner.config.max_grad_norm
    assert float(metrics["loss.test.l2"]) > 0
