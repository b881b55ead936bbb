"""The built-in combiners inside a learner: selected by ``[learner] combiner``, eager and compiled alike, within
``max_grad_norm``; uncertainty weighting's log-variances learn toward the log of their losses."""

from __future__ import annotations

import pytest
import torch

from foxhunt_plugins.combiners import pcgrad, uncertainty

PLUGINS = {"pcgrad": pcgrad, "uncertainty": uncertainty}


def build(make_learner, kit, name: str, **changes):
    return make_learner(kit.small_config(combiner=name, **changes), extra=[(PLUGINS[name], name)])


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_the_named_combiner_trains_within_max_grad_norm(make_learner, kit, name: str) -> None:
    learner = build(make_learner, kit, name, max_grad_norm=0.5)
    assert learner.combiner.name == name
    before = [p.detach().clone() for p in learner.params]
    for _ in range(3):
        learner.step(16)
        assert float(learner.gradients.flat_grad.double().norm()) <= 0.5 * (1 + 1e-5)
    assert int(learner.gradients.safety_clips) == 0  # the combiners keep every contribution within its budget
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.params, strict=True))


def test_pcgrad_changes_the_update_where_components_conflict(make_learner, kit) -> None:
    plain, projected = make_learner(kit.small_config()), build(make_learner, kit, "pcgrad")
    plain.step(16)
    projected.step(16)
    torch.testing.assert_close(plain.loss_values, projected.loss_values)  # same batch, same network
    assert not torch.equal(plain.gradients.flat_grad, projected.gradients.flat_grad)


def test_uncertainty_log_variances_move_toward_the_log_of_each_loss(make_learner, kit) -> None:
    learner = build(make_learner, kit, "uncertainty", lr=0.05)
    for _ in range(60):
        learner.step(16)
    s = learner.combiner_parameters.detach()[:, 0]
    logs = learner.loss_values.log()
    # started at 0; each moved toward ln L (most losses here are far from 1, so the move is visible)
    far = logs.abs() > 0.5
    assert far.any()
    assert (torch.sign(s[far]) == torch.sign(logs[far])).all()
    assert "combiner.parameters" in learner.state_dict()


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_compiled_updates_match_eager_updates(make_learner, kit, fresh_dynamo) -> None:
    # both combiners in one test: the pieces that do not involve the combiner compile once for both
    for name in sorted(PLUGINS):
        eager, compiled = (build(make_learner, kit, name, compile=flag) for flag in (False, True))
        for learner in (eager, compiled):
            for _ in range(2):
                learner.step(32)
        for a, b in zip(eager.optimized, compiled.optimized, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=lambda text, name=name: f"{name}: {text}")
        torch.testing.assert_close(eager.gradients.clipped_norms, compiled.gradients.clipped_norms,
                                   rtol=1e-4, atol=1e-6)
