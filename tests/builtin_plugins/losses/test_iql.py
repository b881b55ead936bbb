"""The IQL value head plugin: expectile loss against a float64 loop, off by default, the slot it declares when on,
budgets, and C51 projecting onto the per-sample atoms it centres."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_run import train_tiny

from foxhunt.actions import Branch
from foxhunt.errors import BudgetError, PluginError
from foxhunt.learner import LearnerConfig, project_sorted
from foxhunt.plugin.records import CentredSupport, LossComponent
from foxhunt_plugins.losses import c51, iql

ON = {"iql": {"enabled": True}}
BUDGETS = {"c51": 0.3, "iql": 0.1}  # c51 gives iql a tenth: the budgets still sum to 1


def reference_expectile_loss(values: np.ndarray, target: np.ndarray, weights: np.ndarray, branch_weights: np.ndarray,
                             tau_low: float, tau_high: float) -> float:
    """Float64 loop: Σ over the two expectiles of |τ − 1(u<0)| u², u = target − V, branch- then batch-averaged."""
    total = 0.0
    batch, branches = target.shape
    for i in range(batch):
        per_branch = 0.0
        for b in range(branches):
            for column, tau in ((iql.Expectile.LOW, tau_low), (iql.Expectile.HIGH, tau_high)):
                u = target[i, b] - values[i, b, column]
                per_branch += branch_weights[b] * abs(tau - (1.0 if u < 0 else 0.0)) * u * u
        total += weights[i] * per_branch / branches
    return total / batch


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), tau=st.floats(0.01, 0.99))
def test_expectile_loss_against_a_float64_loop(seed: int, tau: float) -> None:
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(7, 4, generator=g, dtype=torch.float64) * 3
    out = iql.expectile_loss(u, tau)
    for value, loss in zip(u.flatten().tolist(), out.flatten().tolist(), strict=True):
        assert loss == pytest.approx(abs(tau - (1.0 if value < 0 else 0.0)) * value * value, rel=1e-12, abs=0)
    # its gradient is 2 |τ − 1(u<0)| u: the indicator is a constant
    u.requires_grad_(True)
    (grad,) = torch.autograd.grad(iql.expectile_loss(u, tau).sum(), u)
    for value, slope in zip(u.detach().flatten().tolist(), grad.flatten().tolist(), strict=True):
        assert slope == pytest.approx(2 * ((1 - tau) if value < 0 else tau) * value, rel=1e-12, abs=1e-300)


def test_the_expectile_is_the_minimiser() -> None:
    """Minimising E[L_τ(y − v)] over v gives the τ-expectile: 0.5 is the mean, higher τ is higher (the paper's point)."""
    y = torch.tensor([-2.0, 0.0, 1.0, 5.0], dtype=torch.float64)
    found = []
    for tau in (0.1, 0.5, 0.9):
        v = torch.zeros((), dtype=torch.float64, requires_grad=True)
        optimiser = torch.optim.LBFGS([v], max_iter=200, tolerance_grad=1e-14, tolerance_change=1e-16)

        def closure(tau=tau, v=v, optimiser=optimiser):
            optimiser.zero_grad()
            loss = iql.expectile_loss(y - v, tau).mean()
            loss.backward()
            return loss

        optimiser.step(closure)
        v_found = float(v.detach())
        # the expectile solves Σ |τ − 1(y<v)| (y − v) = 0
        residual = sum(abs(tau - (1.0 if yi < v_found else 0.0)) * (yi - v_found) for yi in y.tolist())
        assert abs(residual) < 1e-8
        found.append(v_found)
    assert found[0] < found[1] < found[2]
    assert found[1] == pytest.approx(float(y.mean()), abs=1e-8)


def test_iql_loss_on_a_learners_inputs_against_a_float64_loop(make_learner) -> None:
    learner = make_learner(extra=[(iql, "iql")], settings={"iql": {"enabled": True, "tau_low": 0.2, "tau_high": 0.9}},
                           budgets=BUDGETS, dtype=torch.float64)
    for _ in range(2):
        learner.step(32)
    inputs = learner.loss_inputs(learner.sample(24))
    component = next(c for c in learner.components if c.name == "iql")
    expected = reference_expectile_loss(inputs.online.state_values.detach().numpy(), inputs.target_taken_q.numpy(),
                                        inputs.batch.weights.numpy(), inputs.branch_weights.numpy(), 0.2, 0.9)
    assert float(component.loss(inputs).detach()) == pytest.approx(expected, rel=1e-12)
    # only the head (and the trunk under it) learns from it
    grads = torch.autograd.grad(component.loss(inputs), learner.params, allow_unused=True)
    reached = {name for (name, _), grad in zip(learner.network.named_parameters(), grads, strict=True) if grad is not None}
    assert reached == {name for name, _ in learner.network.named_parameters()
                       if name.startswith(("trunk.", "state_value_"))}


def test_off_by_default_no_component_no_head(kit, make_learner) -> None:
    from learner_builders import LOSS_MODULES

    host, registries = kit.frozen_host(extra=[(iql, "iql")])
    assert [c.name for c in host.loss_components(LearnerConfig())] == [m.NAME for m in LOSS_MODULES]
    learner = make_learner(extra=[(iql, "iql")])
    assert learner.centring is None and learner.network.state_value_out is None
    # its slot is declared either way: a layout depends on the code alone, so switching it on keeps the fingerprint
    on = kit.frozen_host(extra=[(iql, "iql")], settings=ON)[1].layout
    assert iql.SUPPORT_FLOOR in registries.layout.offsets
    assert registries.layout.fingerprint_hex == on.fingerprint_hex


def test_switched_on_it_declares_its_floor_and_asks_for_centred_atoms(kit) -> None:
    host, registries = kit.frozen_host(extra=[(iql, "iql")], settings={"iql": {"enabled": True, "support_floor": 2.5}})
    slot = registries.layout.slot(iql.SUPPORT_FLOOR)
    assert (slot.width, slot.owner, slot.init) == (len(Branch), "iql", 2.5)
    (component,) = [c for c in host.loss_components(LearnerConfig()) if c.name == "iql"]
    assert component.budget == iql.DEFAULT_BUDGET
    assert component.reads == (iql.SUPPORT_FLOOR,)
    request = component.centred_support
    assert (request.outputs, request.floor) == (iql.Expectile.size(), iql.SUPPORT_FLOOR)
    values = torch.tensor([[[1.0, 3.0]]])
    assert float(request.centre(values)) == 2.0  # centre_mix 0.5: halfway between V_low and V_high


def test_switched_on_the_budgets_must_still_sum_to_one(make_learner) -> None:
    with pytest.raises(BudgetError, match=r"iql=0.1 = 1.1"):
        make_learner(extra=[(iql, "iql")], settings=ON)
    learner = make_learner(extra=[(iql, "iql")], settings=ON, budgets=BUDGETS)
    assert dict(zip([c.name for c in learner.components], learner.budgets, strict=True))["iql"] == 0.1


def test_bad_settings_are_refused(kit) -> None:
    for section, match in (({"tau_low": 0.8, "tau_high": 0.7}, "tau_low"), ({"support_floor": 0.0}, "support_floor"),
                           ({"tau_high": 1.0}, "tau_high"), ({"centre_mix": 1.5}, "centre_mix")):
        with pytest.raises(PluginError, match=match):
            kit.frozen_host(extra=[(iql, "iql")], settings={"iql": section})


def test_c51_projects_onto_each_samples_centred_atoms(make_learner) -> None:
    learner = make_learner(extra=[(iql, "iql")], settings=ON, budgets=BUDGETS, dtype=torch.float64)
    inputs = learner.loss_inputs(learner.sample(16))
    assert inputs.support.shape == (16, len(Branch), learner.config.n_atoms)
    per_sample = project_sorted(inputs.target_atoms, inputs.target_probs, inputs.support)
    expected = -(per_sample * inputs.taken(inputs.online.log_probs)).sum(-1)  # health 1: no smoothing
    torch.testing.assert_close(c51.c51_per_branch(inputs), expected, rtol=1e-12, atol=1e-12)
    # it is not the shared support's projection
    shared = dataclasses.replace(inputs, support=learner.update_support())
    assert not torch.allclose(c51.c51_per_branch(shared), expected)


def test_a_centred_support_floor_must_be_among_the_reads() -> None:
    request = CentredSupport(2, lambda v: v.mean(-1), iql.SUPPORT_FLOOR)
    with pytest.raises(ValueError, match="must be in reads"):
        LossComponent("x", 0.5, lambda inputs: torch.zeros(()), "a loss", centred_support=request)
    with pytest.raises(ValueError, match="int >= 1"):
        CentredSupport(0, lambda v: v, iql.SUPPORT_FLOOR)


def test_a_tiny_run_with_it_switched_on_trains_saves_and_backtests_its_fold(tmp_path, monkeypatch) -> None:
    """Through `foxhunt train` (the built-in entry point): its loss in metrics.jsonl, the fold checkpoint with the
    head saved, loaded and backtested on the test window."""
    import json

    out = train_tiny(tmp_path, monkeypatch, "--set", "plugins.iql.enabled=true", "--set", "learner.budgets.c51=0.3")
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["budgets"]["iql"] == 0.1 and row["budgets"]["c51"] == 0.3
    assert row["losses"]["iql"] >= 0.0 and row["grad_norms"]["iql"] > 0.0
    fold = json.loads((out / "summary.json").read_text())["folds"][0]
    assert "agent" in fold["test"]  # the saved checkpoint (head and all) was loaded and backtested
    assert (out / "checkpoints" / "fold_0").is_dir()
