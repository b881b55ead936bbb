"""Fold boundaries: soft-reset slots restart at their bootstrap and converge at the documented rate;
fold-reset slots return to their declared init; training-persist slots are untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from adaptive_harness import BACKENDS, build_run, isv_array, random_signals
from adaptive_reference import REFERENCES

from foxhunt.monitoring.monitors import attach_monitors
from foxhunt.plugin.records import KernelPoint
from foxhunt.state import ResetCategory
from foxhunt_plugins.adaptive import grad_balance, health, support

BACKEND, DEVICE = BACKENDS[-1]  # the simulator (or the GPU) when there is one: the CPU path is covered elsewhere


def _warm(run, steps: int = 3, seed: int = 0) -> None:
    """Run a few updates on random signals so every slot is away from its init."""
    rng = np.random.default_rng(seed)
    for kernel in run.points(KernelPoint.CONSTRUCT):
        kernel.run(run.context(BACKEND, DEVICE, random_signals(rng, DEVICE)))
    for _ in range(steps):
        context = run.context(BACKEND, DEVICE, random_signals(rng, DEVICE))
        for kernel in run.points(KernelPoint.STEP):
            kernel.run(context)


def test_soft_reset_slots_are_declared_with_their_bootstrap_and_ema_length():
    run = build_run()
    soft = {e.name: e for e in run.registry.entries() if e.category is ResetCategory.SOFT_RESET}
    assert set(soft) == {health.VALUE, grad_balance.SCALE}
    assert soft[health.VALUE].decay_steps == health.HEALTH_DECAY_STEPS
    assert soft[grad_balance.SCALE].decay_steps == grad_balance.GRAD_BALANCE_DECAY_STEPS
    assert run.layout.slot(health.VALUE).init == health.HEALTH_BOOTSTRAP
    assert run.layout.slot(support.HALF_WIDTH).init == support.HALF_WIDTH_BOOTSTRAP
    assert run.layout.slot(grad_balance.SCALE).init == grad_balance.SCALE_BOOTSTRAP


def test_health_restarts_at_its_bootstrap_then_decays_toward_the_observed_value_at_its_rate():
    run = build_run(["health"], device=DEVICE, diagnostics=False)
    _warm(run)
    assert run.isv.view(health.VALUE).item() != health.HEALTH_BOOTSTRAP
    run.registry.fold_boundary()
    assert run.isv.view(health.VALUE).item() == health.HEALTH_BOOTSTRAP
    assert run.isv.view(health.COUNT).item() == 0.0
    signals = random_signals(np.random.default_rng(3), DEVICE)  # held constant: the observed health is constant
    context = run.context(BACKEND, DEVICE, signals)
    kernel = run.kernels["health.update"]
    rate = 1.0 / health.HEALTH_DECAY_STEPS
    kernel.run(context)
    observed = run.isv.view(health.RAW).item()
    gap0 = health.HEALTH_BOOTSTRAP - observed
    assert abs(gap0) > 0.05  # the test must be able to see the decay
    for t in range(1, 200):
        value = run.isv.view(health.VALUE).item()
        assert run.isv.view(health.RAW).item() == pytest.approx(observed, abs=1e-6)
        assert value - observed == pytest.approx(gap0 * (1.0 - rate) ** t, abs=2e-6), t
        kernel.run(context)


def test_support_starts_at_its_bootstrap_converges_at_least_at_its_base_rate_and_survives_folds():
    run = build_run(["support"], device=DEVICE, diagnostics=False)
    np.testing.assert_array_equal(run.isv.view(support.CENTER).cpu().numpy(), support.CENTER_BOOTSTRAP)
    np.testing.assert_array_equal(run.isv.view(support.HALF_WIDTH).cpu().numpy(), support.HALF_WIDTH_BOOTSTRAP)
    signals = random_signals(np.random.default_rng(5), DEVICE)
    context = run.context(BACKEND, DEVICE, signals)
    center_target = signals["learner.q_mean"].cpu().numpy().astype(np.float64)
    half_target = np.clip(4.0 * signals["learner.q_std"].cpu().numpy().astype(np.float64), 1.0, 100.0)
    reference, params = REFERENCES["support.update"]
    base = 1.0 / support.SUPPORT_DECAY_STEPS
    c0 = np.abs(support.CENTER_BOOTSTRAP - center_target)
    h0 = np.abs(support.HALF_WIDTH_BOOTSTRAP - half_target)
    host = {name: tensor.cpu().numpy() for name, tensor in signals.items()}
    for t in range(1, 150):
        expected = reference(isv_array(run), run.layout, params(run.host.settings("support"), None), host)
        run.kernels["support.update"].run(context)
        state = isv_array(run)
        np.testing.assert_allclose(state[run.layout.span(support.CENTER)], expected[run.layout.span(support.CENTER)], rtol=1e-5, atol=1e-5)
        center = run.isv.view(support.CENTER).cpu().numpy()
        half = run.isv.view(support.HALF_WIDTH).cpu().numpy()
        assert np.all(np.abs(center - center_target) <= c0 * (1.0 - base) ** t + 1e-5), t
        assert np.all(np.abs(half - half_target) <= h0 * (1.0 - base) ** t + 1e-5), t
        if t == 1:  # away from its target the adaptive rate beats the base rate
            assert np.all(np.abs(half - half_target) < h0 * (1.0 - base) - 1e-3)
    # The network carries over folds, so the support its logits were trained on does too.
    learned = isv_array(run)
    run.registry.fold_boundary()
    for slot in (support.CENTER, support.HALF_WIDTH):
        np.testing.assert_array_equal(isv_array(run)[run.layout.span(slot)], learned[run.layout.span(slot)])


def test_grad_balance_restarts_at_one_then_decays_toward_the_balancing_scale_at_its_rate():
    run = build_run(["grad_balance"], device=DEVICE, diagnostics=False)
    _warm(run)
    run.registry.fold_boundary()
    np.testing.assert_array_equal(run.isv.view(grad_balance.SCALE).cpu().numpy(), grad_balance.SCALE_BOOTSTRAP)
    unscaled = np.array([4.0, 1.0, 0.5, 2.0])  # what each branch's gradient norm is at scale 1
    weight = 1.0 / unscaled
    target = np.clip(weight / weight.mean(), 0.25, 4.0)
    rate = 1.0 / grad_balance.GRAD_BALANCE_DECAY_STEPS
    norms = torch.zeros(len(unscaled), device=DEVICE)
    context = run.context(BACKEND, DEVICE, {grad_balance.BRANCH_GRAD_NORM: norms})
    for t in range(0, 120):
        scale = run.isv.view(grad_balance.SCALE).cpu().numpy().astype(np.float64)
        np.testing.assert_allclose(scale - target, (1.0 - target) * (1.0 - rate) ** t, atol=2e-5, err_msg=str(t))
        norms.copy_(torch.as_tensor(scale * unscaled, dtype=torch.float32))  # the learner measures scaled gradients
        run.kernels["grad_balance.update"].run(context)


def test_fold_reset_restores_every_reset_slot_and_leaves_training_persist_slots_alone():
    run = build_run(device=DEVICE)
    _warm(run)
    attach_monitors(run.registry, run.monitors)
    view = run.isv.snapshot()
    for monitor in run.monitors:
        monitor.observe(view)
        monitor.observe(view)
    assert sum(monitor.observations for monitor in run.monitors) > 0
    rng = np.random.default_rng(11)
    entries = {e.name: e for e in run.registry.entries()}
    for slot in run.layout.slots:
        if entries[slot.name].category is not ResetCategory.SCHEMA_CONTRACT:
            run.isv.write(slot.name, torch.as_tensor(rng.normal(5.0, 1.0, slot.width), dtype=torch.float32))
    before = isv_array(run)
    reset = run.registry.fold_boundary()
    after = isv_array(run)
    for slot in run.layout.slots:
        span = run.layout.span(slot.name)
        category = entries[slot.name].category
        if category in (ResetCategory.FOLD_RESET, ResetCategory.SOFT_RESET):
            assert slot.name in reset
            np.testing.assert_array_equal(after[span], np.float32(slot.init), err_msg=slot.name)
        else:
            assert category in (ResetCategory.TRAINING_PERSIST, ResetCategory.SCHEMA_CONTRACT), slot.name
            np.testing.assert_array_equal(after[span].view(np.uint32), before[span].view(np.uint32), err_msg=slot.name)
    persist = {s.name for s in run.layout.slots if entries[s.name].category is ResetCategory.TRAINING_PERSIST}
    assert {"cql.alpha", "support.center", "support.half_width"} <= persist
    assert all(monitor.observations == 0 for monitor in run.monitors)
    assert run.registry.unattached() == []
