"""The multi-quantile head plugin: its loss against a float64 loop on fresh random inputs, padded actions' zero
gradient, the ISV weight, the head's columns and its horizon of 0 (no future-return table built or gathered, the
learner otherwise what it was), off by default, its settings, conformance, and a tiny `foxhunt train` run."""

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

from foxhunt.actions import Branch, branch_sizes
from foxhunt.config import load_config
from foxhunt.errors import BudgetError, PluginError
from foxhunt.learner import LearnerConfig
from foxhunt.testing import conformance_machine
from foxhunt_plugins.losses import auxiliary, quantiles

NAME = quantiles.NAME
BUDGETS = {"c51": 0.35, NAME: 0.05}  # c51 gives the head a twentieth
ON = {NAME: {"enabled": True}}
SIZES = branch_sizes()
A = max(SIZES)


def quantile_learner(make_learner, section: dict | None = None, **kw):
    return make_learner(extra=[(quantiles, NAME)], settings={NAME: {"enabled": True, **(section or {})}},
                        budgets=BUDGETS, **kw)


def component(learner, name: str = NAME):
    return next(c for c in learner.components if c.name == name)


def column(branch: int, action: int, level: int, levels: int) -> int:
    """The documented layout: ``Branch × A × L``, row-major."""
    return (branch * A + action) * levels + level


def reference_loss(head, actions, targets, weights, branch_weights, levels, kappa, w) -> float:
    """Float64 loop: w · mean_i w_IS_i · mean_b g_b · Σ_l mean_j ρ_τl(y_ibj − θ_i,b,a_ib,l)."""
    batch, total = len(head), 0.0
    for i in range(batch):
        per_branch = 0.0
        for b in range(len(Branch)):
            a = actions[i][b]
            branch_loss = 0.0
            for l, tau in enumerate(levels):
                prediction = head[i][column(b, a, l, len(levels))]
                samples = targets[i][b]
                acc = 0.0
                for y in samples:
                    delta = y - prediction
                    huber = 0.5 * delta * delta if abs(delta) <= kappa else kappa * (abs(delta) - 0.5 * kappa)
                    acc += abs(tau - (1.0 if delta < 0 else 0.0)) * huber / kappa
                branch_loss += acc / len(samples)
            per_branch += branch_weights[b] * branch_loss
        total += weights[i] * per_branch / len(Branch)
    return w * total / batch


@st.composite
def level_sets(draw) -> tuple[float, ...]:
    count = draw(st.integers(1, 6))
    cuts = draw(st.lists(st.floats(0.01, 0.99), min_size=count, max_size=count, unique=True))
    return tuple(sorted(cuts))


def random_inputs(base, levels: tuple[float, ...], seed: int, batch: int, samples: int, weight: float):
    """``base`` (a learner's LossInputs) with every value the loss reads drawn afresh, in float64."""
    g = torch.Generator().manual_seed(seed)
    width = quantiles.head_width(len(levels))
    head = torch.randn(batch, width, generator=g, dtype=torch.float64) * 2.0
    actions = torch.stack([torch.randint(0, size, (batch,), generator=g) for size in SIZES], dim=1)
    base.isv[base.layout.span(quantiles.WEIGHT)] = weight
    return dataclasses.replace(
        base,
        batch=dataclasses.replace(base.batch, actions=actions,
                                  weights=torch.rand(batch, generator=g, dtype=torch.float64) + 0.1),
        online=dataclasses.replace(base.online, auxiliary=head),
        target_quantiles=torch.randn(batch, len(Branch), samples, generator=g, dtype=torch.float64) * 3.0,
        branch_weights=torch.rand(len(Branch), generator=g, dtype=torch.float64) * 2.0,
        auxiliary_columns={NAME: (0, width)},
    )


def test_the_loss_against_a_float64_loop(make_learner) -> None:
    learner = quantile_learner(make_learner, dtype=torch.float64, fill=20)
    base = learner.loss_inputs(learner.sample(4))

    @settings(max_examples=30, deadline=None)
    @given(seed=st.integers(0, 2**31 - 1), levels=level_sets(), batch=st.integers(1, 6), samples=st.integers(1, 6),
           kappa=st.floats(0.1, 3.0), weight=st.floats(0.0, 4.0))
    def check(seed, levels, batch, samples, kappa, weight) -> None:
        inputs = random_inputs(base, levels, seed, batch, samples, weight)
        expected = reference_loss(inputs.online.auxiliary.tolist(), inputs.batch.actions.tolist(),
                                  inputs.target_quantiles.tolist(), inputs.batch.weights.tolist(),
                                  inputs.branch_weights.tolist(), levels, kappa,
                                  float(inputs.slot(quantiles.WEIGHT)[0]))  # the ISV's float32 of weight
        loss = quantiles.quantile_loss(inputs, levels, kappa)
        assert float(loss) == pytest.approx(expected, rel=1e-9, abs=1e-12)

    check()


def test_the_learners_inputs_against_the_loop_and_the_weight_slot(make_learner) -> None:
    """Through the learner's own LossInputs (its head, its target IQN samples, its importance weights)."""
    learner = quantile_learner(make_learner, dtype=torch.float64)
    inputs = learner.loss_inputs(learner.sample(16))
    start, stop = learner.auxiliary.columns[NAME]
    assert (start, stop) == (0, len(Branch) * A * len(quantiles.LEVELS))
    expected = reference_loss(inputs.online.auxiliary[:, start:stop].tolist(), inputs.batch.actions.tolist(),
                              inputs.target_quantiles.tolist(), inputs.batch.weights.tolist(),
                              inputs.branch_weights.tolist(), quantiles.LEVELS, quantiles.KAPPA, 1.0)
    loss = component(learner).loss(inputs)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-9)
    # the weight is read from the ISV at each call: 0.5 halves it, 0 gives zero loss and zero gradient
    assert_weight_slot_scales_the_loss(learner, component(learner).loss, inputs, quantiles.WEIGHT)


def test_padded_actions_get_exactly_zero_gradient(make_learner) -> None:
    learner = quantile_learner(make_learner, dtype=torch.float64)
    inputs = learner.loss_inputs(learner.sample(32))
    levels = len(quantiles.LEVELS)
    padded = [column(b, a, l, levels) for b, size in enumerate(SIZES) for a in range(size, A) for l in range(levels)]
    real = sorted(set(range(quantiles.head_width(levels))) - set(padded))
    assert padded and real  # the branches differ in size: some columns are padding
    head = inputs.online.auxiliary.detach().clone().requires_grad_(True)
    leaf = dataclasses.replace(inputs, online=dataclasses.replace(inputs.online, auxiliary=head))
    (grad,) = torch.autograd.grad(component(learner).loss(leaf), head)
    assert not grad[:, padded].any()
    assert grad[:, real].any()
    # and in the network: the output rows of padded columns never move, the taken actions' rows do
    out = learner.network.auxiliary_out
    weight_grad, bias_grad = torch.autograd.grad(component(learner).loss(inputs), [out.weight, out.bias])
    assert not weight_grad[padded].any() and not bias_grad[padded].any()
    assert bias_grad[real].any()


def test_its_gradient_reaches_only_the_trunk_and_the_auxiliary_head(make_learner) -> None:
    learner = quantile_learner(make_learner)
    inputs = learner.loss_inputs(learner.sample(32))
    names = [name for name, _ in learner.network.named_parameters()]
    grads = torch.autograd.grad(component(learner).loss(inputs), learner.params, allow_unused=True)
    reached = {n for n, grad in zip(names, grads, strict=True) if grad is not None and bool(grad.abs().sum() > 0)}
    assert reached <= {name for name in names if name.startswith(("trunk.", "encoder.", "auxiliary_"))}
    assert {"auxiliary_out.weight", "auxiliary_hidden.weight"} <= reached
    assert any(n.startswith("trunk.") for n in reached)


def test_the_loss_traces_whole_for_the_compiled_update(make_learner) -> None:
    """No graph break (``[learner] compile`` compiles the update with ``fullgraph``): the levels are fills, not a
    tensor built from a list."""
    learner = quantile_learner(make_learner)
    inputs = learner.loss_inputs(learner.sample(8))
    compiled = torch.compile(component(learner).loss, fullgraph=True, backend="eager")
    assert torch.equal(compiled(inputs), component(learner).loss(inputs))


def test_the_whole_update_middle_compiles_with_it(make_learner) -> None:
    """Under torch 2.11 a DimTable's size() broke the graph inside `torch.func.vjp` though the loss alone traced."""
    assert_update_middle_compiles(quantile_learner(make_learner))


# -- horizon 0: no future returns -------------------------------------------------------------------------------
def test_a_horizon_of_zero_gathers_no_future_returns_and_changes_nothing_else(make_learner) -> None:
    plain = make_learner(seed=3)
    on = quantile_learner(make_learner, seed=3)
    assert on.future_horizon == plain.future_horizon == 0
    assert component(on).auxiliary.horizon == 0
    # the replay keeps no bar index and its saved state is the plain one's
    assert "bars" not in dict(on.replay.named_buffers())
    assert list(on.replay.state_dict()) == list(plain.replay.state_dict())
    on.use_future_returns(torch.linspace(1.0, 2.0, 40).numpy(), 5, 30)  # nothing to build
    assert on.replay.future_table is None
    # the same transitions sampled at the same draws, with no future returns
    uniforms = torch.rand(16, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    a, b = (learner.replay.sample_at(uniforms, learner.reads.gamma) for learner in (plain, on))
    assert a.future_returns is None and b.future_returns is None and b.future_valid is None
    for field in dataclasses.fields(a):
        if getattr(a, field.name) is not None:
            assert torch.equal(getattr(a, field.name), getattr(b, field.name)), field.name
    # the network is the plain one plus the head built last: every other parameter drew the same values
    on_params = dict(on.network.named_parameters())
    for name, parameter in plain.network.named_parameters():
        assert torch.equal(on_params[name], parameter), name
    assert set(on_params) - set(dict(plain.network.named_parameters())) == {
        "auxiliary_hidden.weight", "auxiliary_hidden.bias", "auxiliary_out.weight", "auxiliary_out.bias"}
    on.step(8)  # an update runs with the head and no future returns


def test_beside_a_task_that_reads_future_returns_the_largest_horizon_wins(make_learner) -> None:
    settings_ = {NAME: {"enabled": True}, "auxiliary": {"enabled": True, "tasks": ["return"]}}
    learner = make_learner(extra=[(quantiles, NAME), (auxiliary, "auxiliary")], settings=settings_,
                           budgets={"c51": 0.3, NAME: 0.05, auxiliary.RETURN: 0.05})
    width = quantiles.head_width(len(quantiles.LEVELS))
    assert learner.future_horizon == 1
    assert learner.auxiliary.outputs == width + 1
    assert learner.sample(8).future_returns.shape == (8, 1)


# -- the plugin's declarations and settings ----------------------------------------------------------------------
def test_off_by_default_no_component_no_head(kit, make_learner) -> None:
    from learner_builders import LOSS_MODULES

    host, registries = kit.frozen_host(extra=[(quantiles, NAME)])
    assert [c.name for c in host.loss_components(LearnerConfig())] == [m.NAME for m in LOSS_MODULES]
    learner = make_learner(extra=[(quantiles, NAME)])
    assert learner.network.auxiliary_out is None and learner.future_horizon == 0
    # its slot is declared either way: switching it on keeps the fingerprint
    on = kit.frozen_host(extra=[(quantiles, NAME)], settings=ON)[1].layout
    assert quantiles.WEIGHT in registries.layout.offsets and quantiles.WEIGHT in on.offsets
    assert registries.layout.fingerprint_hex == on.fingerprint_hex


def test_switched_on_its_component_slot_and_head(kit, make_learner) -> None:
    section = {"enabled": True, "levels": [0.1, 0.5, 0.9], "kappa": 0.5, "weight": 0.25}
    host, registries = kit.frozen_host(extra=[(quantiles, NAME)], settings={NAME: section})
    slot = registries.layout.slot(quantiles.WEIGHT)
    assert (slot.width, slot.owner, slot.init) == (1, NAME, 0.25)
    (found,) = [c for c in host.loss_components(LearnerConfig()) if c.name == NAME]
    assert (found.budget, found.reads, found.auxiliary.outputs, found.auxiliary.horizon) == (
        0.05, (quantiles.WEIGHT,), len(Branch) * A * 3, 0)
    assert found.loss.keywords == {"levels": (0.1, 0.5, 0.9), "kappa": 0.5}
    learner = quantile_learner(make_learner, section)
    assert learner.network.auxiliary_out.out_features == len(Branch) * A * 3
    assert float(learner.isv.tensor[registries.layout.span(quantiles.WEIGHT)]) == 0.25


@pytest.mark.parametrize(("section", "match"), [
    ({"levels": [0.5, 0.25]}, "levels"), ({"levels": [0.25, 0.25]}, "levels"), ({"levels": []}, "levels"),
    ({"levels": [0.0, 0.5]}, "levels"), ({"levels": [0.5, 1.0]}, "levels"), ({"levels": [-0.1]}, "levels"),
    ({"levels": [0.5, float("nan")]}, "levels"), ({"kappa": 0.0}, "kappa"), ({"kappa": float("inf")}, "kappa"),
    ({"weight": -0.5}, "weight"), ({"weight": float("nan")}, "weight"), ({"levles": [0.5]}, "levles"),
    ({"levels": "0.5"}, "levels"), ({"levels": [0.5, "x"]}, r"levels\[1\]"),
])
def test_bad_settings_are_refused_naming_the_setting(kit, section: dict, match: str) -> None:
    with pytest.raises(PluginError, match=match):
        kit.frozen_host(extra=[(quantiles, NAME)], settings={NAME: {"enabled": True, **section}})


def test_switched_on_the_budgets_must_still_sum_to_one(make_learner) -> None:
    with pytest.raises(BudgetError, match=rf"{NAME}=0.05 = 1.05"):
        make_learner(extra=[(quantiles, NAME)], settings=ON)
    learner = quantile_learner(make_learner)
    budgets = dict(zip([c.name for c in learner.components], learner.budgets, strict=True))
    assert (budgets[NAME], budgets["c51"]) == (0.05, 0.35)


# -- conformance and a run -------------------------------------------------------------------------------------------
def test_the_opt_in_plugin_passes_conformance_switched_on() -> None:
    """Its weight slot, its state entry and the learner's auxiliary head, through resets and checkpoints."""
    quick = settings(max_examples=3, stateful_step_count=5, deadline=None, database=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])
    enabled = load_config(None, ["plugins.quantiles.enabled=true"])
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(
        conformance_machine(quantiles, NAME, enabled, test_settings=quick)).run(result)
    assert result.testsRun == 1
    assert "\n".join(text for _, text in result.failures + result.errors) == ""


def test_a_tiny_run_with_it_switched_on_trains_without_future_returns(tmp_path, monkeypatch) -> None:
    """Through `foxhunt train`: a finite loss in metrics.jsonl, no future-return table built or gathered in the
    whole run, and the fold checkpoint with the head saved, loaded and backtested on the test window."""
    from safetensors.torch import load_file

    import foxhunt.learner.learner as learner_module
    from foxhunt.checkpoint import TENSORS_FILE
    from foxhunt.learner import Replay

    def never(*args, **kwargs):
        raise AssertionError("a run whose every task has horizon 0 built or gathered future returns")

    monkeypatch.setattr(learner_module, "future_return_table", never)
    monkeypatch.setattr(Replay, "_future", never)
    out = train_tiny(tmp_path, monkeypatch, "--set", "plugins.quantiles.enabled=true",
                     "--set", "learner.budgets.c51=0.35")
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["budgets"][NAME] == 0.05
    assert math.isfinite(row["losses"][NAME]) and row["losses"][NAME] > 0.0
    assert math.isfinite(row["grad_norms"][NAME]) and row["grad_norms"][NAME] > 0.0
    fold = json.loads((out / "summary.json").read_text())["folds"][0]
    assert "agent" in fold["test"]  # the saved checkpoint (head and all) was loaded and backtested
    saved = load_file(out / "checkpoints" / "fold_0" / TENSORS_FILE)
    assert saved["learner.network.auxiliary_out.bias"].shape == (quantiles.head_width(len(quantiles.LEVELS)),)
