"""The horizon-decomposed value plugin: the learner's n-step reward part (`LossInputs.target_rewards`) against the
batch and the target, the loss against a float64 loop on fresh random inputs, the ISV weight, its head's columns
and horizon of 0, off by default, its settings and dimension table, conformance, and a tiny `foxhunt train` run."""

from __future__ import annotations

import dataclasses
import json
import math
import unittest

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from learner_builders import assert_update_middle_compiles, assert_weight_slot_scales_the_loss
from tiny_run import train_tiny

from foxhunt.actions import Branch
from foxhunt.config import load_config
from foxhunt.errors import BudgetError, PluginError
from foxhunt.learner import LearnerConfig
from foxhunt.testing import conformance_machine
from foxhunt_plugins.losses import horizon_values

NAME = horizon_values.NAME
VH = horizon_values.ValueHorizon
BUDGETS = {"c51": 0.35, NAME: 0.05}  # c51 gives the decoders a twentieth
ON = {NAME: {"enabled": True}}


def horizon_learner(make_learner, section: dict | None = None, **kw):
    return make_learner(extra=[(horizon_values, NAME)], settings={NAME: {"enabled": True, **(section or {})}},
                        budgets=BUDGETS, **kw)


def component(learner):
    return next(c for c in learner.components if c.name == NAME)


def reference_loss(head, rewards, targets, weights, branch_weights, w) -> float:
    """Float64 loop over the documented layout (column ``b × ValueHorizon + h``):
    w · mean_i w_IS_i · mean_b g_b · ½ [(V_short − r̂)² + (V_long − ŷ)²]."""
    total = 0.0
    for i in range(len(head)):
        per_branch = 0.0
        for b in range(len(Branch)):
            short = head[i][b * VH.size() + VH.SHORT] - rewards[i][b]
            long = head[i][b * VH.size() + VH.LONG] - targets[i][b]
            per_branch += branch_weights[b] * 0.5 * (short * short + long * long)
        total += weights[i] * per_branch / len(Branch)
    return w * total / len(head)


# -- the n-step reward part the core hands every loss ------------------------------------------------------------
@pytest.mark.parametrize("execution_regret", [False, True])
def test_target_rewards_are_the_n_step_reward_part_normalised_like_the_target(make_learner, execution_regret) -> None:
    learner = horizon_learner(make_learner, dtype=torch.float64, execution_regret=execution_regret)
    learner.popart.mu.copy_(torch.tensor([0.3, -0.2, 0.1, 0.0], dtype=torch.float64))
    learner.popart.sigma.copy_(torch.tensor([1.5, 0.7, 2.0, 1.0], dtype=torch.float64))
    inputs = learner.loss_inputs(learner.sample(24))
    mu, sigma = learner.popart.mu, learner.popart.sigma
    assert inputs.target_rewards.shape == inputs.target_q.shape == (24, len(Branch))
    # σ (target_q − target_rewards) is the bootstrapped remainder γ^m E[Z'] alone, with or without the credit
    unnormalised_atoms = inputs.target_atoms * sigma[:, None] + mu[:, None]
    rewards = inputs.target_rewards * sigma + mu  # r, unnormalised
    bootstrap = ((unnormalised_atoms - rewards[..., None]) * inputs.target_probs).sum(-1)
    torch.testing.assert_close((inputs.target_q - inputs.target_rewards) * sigma, bootstrap, rtol=1e-10, atol=1e-10)
    batch_part = (inputs.batch.returns - mu) / sigma
    if execution_regret:  # the credit is part of r: the reward part the target was built from, not the replay's
        assert not torch.allclose(inputs.target_rewards, batch_part)
    else:
        torch.testing.assert_close(inputs.target_rewards, batch_part, rtol=1e-12, atol=1e-12)
    # a terminal sample's target is its reward part alone
    ended = inputs.batch.discounts[:, 0] == 0
    assert ended.any()
    torch.testing.assert_close(inputs.target_q[ended], inputs.target_rewards[ended], rtol=1e-12, atol=1e-12)


# -- the loss --------------------------------------------------------------------------------------------------------
def test_the_loss_against_a_float64_loop(make_learner) -> None:
    learner = horizon_learner(make_learner, dtype=torch.float64, fill=20)
    base = learner.loss_inputs(learner.sample(4))
    width = len(Branch) * VH.size()

    @settings(max_examples=30, deadline=None)
    @given(seed=st.integers(0, 2**31 - 1), batch=st.integers(1, 8), weight=st.floats(0.0, 4.0),
           scale=st.floats(0.01, 10.0))
    def check(seed, batch, weight, scale) -> None:
        g = torch.Generator().manual_seed(seed)

        def draw(*shape):
            return torch.randn(*shape, generator=g, dtype=torch.float64) * scale

        base.isv[base.layout.span(horizon_values.WEIGHT)] = weight
        inputs = dataclasses.replace(
            base,
            batch=dataclasses.replace(base.batch, weights=torch.rand(batch, generator=g, dtype=torch.float64) + 0.1),
            online=dataclasses.replace(base.online, auxiliary=draw(batch, width)),
            target_q=draw(batch, len(Branch)), target_rewards=draw(batch, len(Branch)),
            branch_weights=torch.rand(len(Branch), generator=g, dtype=torch.float64) * 2.0,
            auxiliary_columns={NAME: (0, width)},
        )
        expected = reference_loss(inputs.online.auxiliary.tolist(), inputs.target_rewards.tolist(),
                                  inputs.target_q.tolist(), inputs.batch.weights.tolist(),
                                  inputs.branch_weights.tolist(),
                                  float(inputs.slot(horizon_values.WEIGHT)[0]))  # the ISV's float32 of weight
        assert float(horizon_values.horizon_loss(inputs)) == pytest.approx(expected, rel=1e-10, abs=1e-14)

    check()


def test_the_learners_inputs_against_the_loop_and_the_weight_slot(make_learner) -> None:
    learner = horizon_learner(make_learner, dtype=torch.float64)
    inputs = learner.loss_inputs(learner.sample(16))
    start, stop = learner.auxiliary.columns[NAME]
    assert (start, stop) == (0, len(Branch) * VH.size())
    expected = reference_loss(inputs.online.auxiliary[:, start:stop].tolist(), inputs.target_rewards.tolist(),
                              inputs.target_q.tolist(), inputs.batch.weights.tolist(),
                              inputs.branch_weights.tolist(), 1.0)
    loss = component(learner).loss(inputs)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-10)
    assert_weight_slot_scales_the_loss(learner, component(learner).loss, inputs, horizon_values.WEIGHT)


def test_each_decoder_learns_from_its_own_target_only(make_learner) -> None:
    """V_short's columns get the gradient of the reward part, V_long's of the whole target; nothing else moves."""
    learner = horizon_learner(make_learner, dtype=torch.float64)
    inputs = learner.loss_inputs(learner.sample(16))
    head = inputs.online.auxiliary.detach().clone().requires_grad_(True)
    leaf = dataclasses.replace(inputs, online=dataclasses.replace(inputs.online, auxiliary=head))
    (grad,) = torch.autograd.grad(component(learner).loss(leaf), head)
    values = head.detach().unflatten(-1, (len(Branch), VH.size()))
    scale = (inputs.batch.weights[:, None] * inputs.branch_weights / (len(Branch) * 16))
    expected = torch.stack([scale * (values[..., VH.SHORT] - inputs.target_rewards),
                            scale * (values[..., VH.LONG] - inputs.target_q)], dim=-1).flatten(1)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14)
    # a zero gradient only where a decoder already equals its target: the short one is not fitted to the long one
    moved = dataclasses.replace(leaf, target_q=inputs.target_q + 1.0)
    (moved_grad,) = torch.autograd.grad(component(learner).loss(moved), head)
    moved_grad = moved_grad.unflatten(-1, (len(Branch), VH.size()))
    torch.testing.assert_close(moved_grad[..., VH.SHORT], grad.unflatten(-1, (len(Branch), VH.size()))[..., VH.SHORT],
                               rtol=0, atol=0)


def test_its_gradient_reaches_only_the_trunk_and_the_auxiliary_head(make_learner) -> None:
    learner = horizon_learner(make_learner)
    inputs = learner.loss_inputs(learner.sample(32))
    names = [name for name, _ in learner.network.named_parameters()]
    grads = torch.autograd.grad(component(learner).loss(inputs), learner.params, allow_unused=True)
    reached = {n for n, grad in zip(names, grads, strict=True) if grad is not None and bool(grad.abs().sum() > 0)}
    assert reached <= {name for name in names if name.startswith(("trunk.", "encoder.", "auxiliary_"))}
    assert {"auxiliary_out.weight", "auxiliary_hidden.weight"} <= reached
    assert any(n.startswith("trunk.") for n in reached)


def test_the_loss_traces_whole_for_the_compiled_update(make_learner) -> None:
    """No graph break (``[learner] compile`` compiles the update with ``fullgraph``)."""
    learner = horizon_learner(make_learner)
    inputs = learner.loss_inputs(learner.sample(8))
    compiled = torch.compile(component(learner).loss, fullgraph=True, backend="eager")
    assert torch.equal(compiled(inputs), component(learner).loss(inputs))


def test_the_whole_update_middle_compiles_with_it(make_learner) -> None:
    """Under torch 2.11 a DimTable's size() broke the graph inside `torch.func.vjp` though the loss alone traced."""
    assert_update_middle_compiles(horizon_learner(make_learner))


def test_a_horizon_of_zero_gathers_no_future_returns(make_learner) -> None:
    learner = horizon_learner(make_learner)
    assert component(learner).auxiliary.horizon == 0 and learner.future_horizon == 0
    assert "bars" not in dict(learner.replay.named_buffers())
    assert learner.sample(8).future_returns is None
    learner.step(8)


# -- the plugin's declarations and settings ----------------------------------------------------------------------
def test_off_by_default_no_component_no_head(kit, make_learner) -> None:
    from learner_builders import LOSS_MODULES

    host, registries = kit.frozen_host(extra=[(horizon_values, NAME)])
    assert [c.name for c in host.loss_components(LearnerConfig())] == [m.NAME for m in LOSS_MODULES]
    learner = make_learner(extra=[(horizon_values, NAME)])
    assert learner.network.auxiliary_out is None and learner.future_horizon == 0
    on = kit.frozen_host(extra=[(horizon_values, NAME)], settings=ON)[1]
    for layout in (registries.layout, on.layout):
        assert horizon_values.WEIGHT in layout.offsets
    assert registries.layout.fingerprint_hex == on.layout.fingerprint_hex
    # its dimension table is published either way
    assert registries.dims["ValueHorizon"] == (NAME, VH) == on.dims["ValueHorizon"]


def test_switched_on_its_component_slot_and_head(kit, make_learner) -> None:
    host, registries = kit.frozen_host(extra=[(horizon_values, NAME)],
                                       settings={NAME: {"enabled": True, "weight": 0.25}})
    slot = registries.layout.slot(horizon_values.WEIGHT)
    assert (slot.width, slot.owner, slot.init) == (1, NAME, 0.25)
    (found,) = [c for c in host.loss_components(LearnerConfig()) if c.name == NAME]
    assert (found.budget, found.reads, found.auxiliary.outputs, found.auxiliary.horizon) == (
        0.05, (horizon_values.WEIGHT,), len(Branch) * VH.size(), 0)
    learner = horizon_learner(make_learner, {"weight": 0.25})
    assert learner.network.auxiliary_out.out_features == len(Branch) * VH.size()
    assert float(learner.isv.tensor[registries.layout.span(horizon_values.WEIGHT)]) == 0.25


@pytest.mark.parametrize(("section", "match"), [
    ({"weight": -0.5}, "weight"), ({"weight": float("nan")}, "weight"), ({"weight": float("inf")}, "weight"),
    ({"weight": "heavy"}, "weight"), ({"wieght": 1.0}, "wieght"),
])
def test_bad_settings_are_refused_naming_the_setting(kit, section: dict, match: str) -> None:
    with pytest.raises(PluginError, match=match):
        kit.frozen_host(extra=[(horizon_values, NAME)], settings={NAME: {"enabled": True, **section}})


def test_switched_on_the_budgets_must_still_sum_to_one(make_learner) -> None:
    with pytest.raises(BudgetError, match=rf"{NAME}=0.05 = 1.05"):
        make_learner(extra=[(horizon_values, NAME)], settings=ON)


# -- conformance and a run -------------------------------------------------------------------------------------------
def test_the_opt_in_plugin_passes_conformance_switched_on() -> None:
    quick = settings(max_examples=3, stateful_step_count=5, deadline=None, database=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])
    enabled = load_config(None, ["plugins.horizon_values.enabled=true"])
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(
        conformance_machine(horizon_values, NAME, enabled, test_settings=quick)).run(result)
    assert result.testsRun == 1
    assert "\n".join(text for _, text in result.failures + result.errors) == ""


def test_a_tiny_run_with_it_switched_on_trains_saves_and_backtests_its_fold(tmp_path, monkeypatch) -> None:
    """Through `foxhunt train`: a finite loss in metrics.jsonl, the fold checkpoint with the decoders saved,
    loaded and backtested on the test window."""
    from safetensors.torch import load_file

    from foxhunt.checkpoint import TENSORS_FILE

    out = train_tiny(tmp_path, monkeypatch, "--set", "plugins.horizon_values.enabled=true",
                     "--set", "learner.budgets.c51=0.35")
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["budgets"][NAME] == 0.05
    assert math.isfinite(row["losses"][NAME]) and row["losses"][NAME] > 0.0
    assert math.isfinite(row["grad_norms"][NAME]) and row["grad_norms"][NAME] > 0.0
    fold = json.loads((out / "summary.json").read_text())["folds"][0]
    assert "agent" in fold["test"]
    saved = load_file(out / "checkpoints" / "fold_0" / TENSORS_FILE)
    assert saved["learner.network.auxiliary_out.bias"].shape == (len(Branch) * VH.size(),)
