"""The loss plugins as plugins: records, default budgets, config overrides, ISV reads, and a new loss
added with nothing but a plugin."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

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


def reference_mask(slot: int, head: int, share: float) -> bool:
    """The bootstrap hash in Python integers (no overflow to hide), head counted from 1."""
    m32 = 0xFFFFFFFF
    h = ((slot & m32) * 0x9E3779B1 & m32) ^ (head * 0x85EBCA77 & m32)
    h = ((h ^ (h >> 15)) * 0x2C1B3C6D) & m32
    h = h ^ (h >> 13)
    return (h & 0xFFFF) < int(share * 65536)


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), heads=st.integers(2, 8), share=st.floats(0.05, 1.0))
def test_the_bootstrap_mask_is_a_fixed_hash_of_slot_and_head(seed: int, heads: int, share: float) -> None:
    slots = torch.randint(0, 2**40, (64,), generator=torch.Generator().manual_seed(seed))
    mask = ensemble.bootstrap_mask(slots, heads, share)
    want = [[float(reference_mask(int(s), k + 1, share)) for k in range(heads)] for s in slots.tolist()]
    assert mask.tolist() == want
    assert torch.equal(ensemble.bootstrap_mask(slots.flip(0), heads, share), mask.flip(0))  # per slot, not per row


def test_each_head_learns_from_its_share_of_the_slots_independently() -> None:
    mask = ensemble.bootstrap_mask(torch.arange(200_000), 5, 0.5)
    assert torch.allclose(mask.mean(0), torch.full((5,), 0.5), atol=0.01)
    both = (mask[:, 0] * mask[:, 1]).mean()
    assert abs(float(both) - 0.25) < 0.01  # heads 1 and 2 agree as independent coins would
    assert torch.equal(ensemble.bootstrap_mask(torch.arange(1000), 5, 1.0), torch.ones(1000, 5))


def test_a_bootstrapped_ensemble_loss_fits_each_head_on_its_own_slots(make_learner) -> None:
    learner = make_learner(settings={"ensemble": {"diversity": 0.0, "bootstrap": 0.6}}, dtype=torch.float64)
    inputs = learner.loss_inputs(learner.sample(32))
    component = next(c for c in learner.components if c.name == "ensemble")
    q = inputs.taken(inputs.online.ensemble.transpose(0, 1), action_dim=3)  # [B, K, Branch]
    batch, heads, branches = q.shape
    weights = inputs.branch_weights.expand(batch, branches) if inputs.branch_weights.dim() == 1 else inputs.branch_weights
    total = 0.0
    for b in range(batch):
        slot = int(inputs.batch.indices[b])
        per_branch = []
        for branch in range(branches):
            fit = sum(0.5 * float(q[b, k, branch] - inputs.target_q[b, branch]) ** 2
                      for k in range(heads) if reference_mask(slot, k + 1, 0.6))
            per_branch.append(fit / heads / 0.6 * float(weights[b, branch]))
        total += sum(per_branch) / branches * float(inputs.batch.weights[b])
    torch.testing.assert_close(float(component.loss(inputs)), total / batch, rtol=1e-10, atol=1e-12)


def test_bootstrap_needs_diversity_zero_and_a_share_in_range() -> None:
    assert ensemble.EnsembleSettings().bootstrap == 1.0
    with pytest.raises(ValueError, match="set diversity = 0"):
        ensemble.EnsembleSettings(bootstrap=0.5)
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="bootstrap"):
            ensemble.EnsembleSettings(diversity=0.0, bootstrap=bad)


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
