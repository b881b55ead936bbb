"""Execution credit (foxhunt/learner/execution_credit.py): the direction's return gets back a non-greedy execution's
regret, the execution branches learn only from the orders they shaped, and the reward split gives each branch its
part of the reward. Checked against float64 loops and through `foxhunt train`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.actions import Branch, Direction, branch_sizes
from foxhunt.learner.execution_credit import (
    EXECUTION_BRANCHES,
    SHAPING,
    branch_rewards,
    execution_columns,
    execution_regret,
    shaping_table,
    shaping_weights,
)
from foxhunt.learner.network import make_action_mask

SIZES = branch_sizes()
EXECUTION = (Branch.MAGNITUDE, Branch.ORDER_TYPE, Branch.URGENCY)


def random_actions(rng: np.random.Generator, batch: int) -> torch.Tensor:
    return torch.tensor(np.stack([rng.integers(0, size, batch) for size in SIZES], axis=1), dtype=torch.int64)


def random_q(rng: np.random.Generator, batch: int) -> torch.Tensor:
    """``[B, Branch, A]`` float64 with junk on the padded slots, which must never be chosen."""
    q = rng.normal(size=(batch, len(SIZES), max(SIZES)))
    for b, size in enumerate(SIZES):
        q[:, b, size:] = 1e6
    return torch.tensor(q)


def test_the_shaping_table_is_what_the_environment_reads_for_each_direction() -> None:
    """HOLD places no order; FLAT closes at the market or a limit, with no size to pick; LONG and SHORT use all
    three (foxhunt/env/physics.py: target_position reads the magnitude for SHORT/LONG only, env_step_row the
    order type and urgency of any order)."""
    table = shaping_table()
    assert not table[Direction.HOLD].any()
    assert table[Direction.FLAT].tolist() == [b in (Branch.ORDER_TYPE, Branch.URGENCY) for b in Branch]
    for direction in (Direction.LONG, Direction.SHORT):
        assert table[direction].tolist() == [b in EXECUTION for b in Branch]
    assert set(SHAPING) == set(Direction)
    assert not table[:, Branch.DIRECTION].any()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shaping_weights_keep_the_direction_and_the_execution_that_placed_the_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    actions = random_actions(rng, 64)
    weights = shaping_weights(actions, shaping_table())
    for i in range(64):
        direction = Direction(int(actions[i, Branch.DIRECTION]))
        for b in Branch:
            assert bool(weights[i, b]) == (b == Branch.DIRECTION or b in SHAPING[direction])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_execution_regret_against_a_float64_loop(seed: int) -> None:
    """Direction column: Σ over the shaping branches of σ_b (Q_b(s, argmax chooser_b) − Q_b(s, a_b)); others 0."""
    rng = np.random.default_rng(seed)
    batch = 48
    actions, q, chooser = random_actions(rng, batch), random_q(rng, batch), random_q(rng, batch)
    sigma = torch.tensor(rng.uniform(0.1, 3.0, len(SIZES)))
    got = execution_regret(actions, q, chooser, make_action_mask(SIZES), sigma, shaping_table())
    for i in range(batch):
        direction = Direction(int(actions[i, Branch.DIRECTION]))
        total = 0.0
        for b in SHAPING[direction]:
            size = SIZES[b]
            greedy = max(range(size), key=lambda a: float(chooser[i, b, a]))
            total += float(sigma[b]) * (float(q[i, b, greedy]) - float(q[i, b, int(actions[i, b])]))
        assert float(got[i, Branch.DIRECTION]) == pytest.approx(total, rel=1e-12, abs=1e-12)
        for b in EXECUTION:
            assert float(got[i, b]) == 0.0


def test_no_regret_when_the_execution_taken_is_the_greedy_one() -> None:
    rng = np.random.default_rng(5)
    q = random_q(rng, 16)
    mask = make_action_mask(SIZES)
    actions = q.masked_fill(~mask, float("-inf")).argmax(-1)
    actions[:, Branch.DIRECTION] = torch.tensor(rng.integers(0, len(Direction), 16))
    got = execution_regret(actions, q, q, mask, torch.ones(len(SIZES), dtype=torch.float64), shaping_table())
    assert torch.equal(got, torch.zeros_like(got))


def test_the_learners_direction_target_gains_the_regret_and_nothing_else_moves(make_learner) -> None:
    """Learner.targets with execution_regret on: the direction column of returns, atoms and expected value moves
    by the regret the target network prices at s with the online network choosing; the other branches do not."""
    off = make_learner(dtype=torch.float64)
    on = make_learner(dtype=torch.float64, execution_regret=True)
    on.network.load_state_dict(off.network.state_dict())
    on.target.load_state_dict(off.target.state_dict())
    batch = off.sample(32)
    support = off.update_support()
    taus = off._taus(32, off.config.n_target_quantiles)
    plain, credited = off.targets(batch, support, taus), on.targets(batch, support, taus)
    with torch.no_grad():
        regret = execution_regret(batch.actions, on.target(batch.obs, support).q, on.network(batch.obs, support).q,
                                  on.network.action_mask, on.popart.sigma, shaping_table())[:, Branch.DIRECTION]
    assert (regret != 0).any()  # the replay's random actions are not all greedy
    torch.testing.assert_close(credited.expected[:, Branch.DIRECTION], plain.expected[:, Branch.DIRECTION] + regret)
    torch.testing.assert_close(credited.atoms[:, Branch.DIRECTION],
                               plain.atoms[:, Branch.DIRECTION] + regret[:, None])
    for b in EXECUTION:
        torch.testing.assert_close(credited.expected[:, b], plain.expected[:, b], rtol=0, atol=0)


def test_with_shaping_only_a_hold_teaches_the_execution_heads_nothing(make_learner) -> None:
    """A batch of HOLDs: the loss gives the execution branches' own head weights no gradient, while the
    direction head still learns; without the switch they all do."""
    for shaping_only in (False, True):
        learner = make_learner(dtype=torch.float64, shaping_only=shaping_only)
        batch = learner.sample(32)
        actions = batch.actions.clone()
        actions[:, Branch.DIRECTION] = Direction.HOLD
        batch = type(batch)(**{**batch.__dict__, "actions": actions})
        inputs = learner.loss_inputs(batch)
        weights = inputs.branch_weights
        if shaping_only:
            assert weights.shape == (32, len(Branch))
            assert (weights[:, list(EXECUTION)] == 0).all() and (weights[:, Branch.DIRECTION] > 0).all()
        loss = sum(component.loss(inputs) for component in learner.components)
        online = inputs.online
        # every branch-indexed output and where its Branch axis is
        outputs = [(online.log_probs, 1), (online.q, 1), (online.quantiles, 2), (online.ensemble, 2)]
        grads = torch.autograd.grad(loss, [t for t, _ in outputs], allow_unused=True)
        execution_moves = direction_moves = 0.0
        for (_, axis), grad in zip(outputs, grads, strict=True):
            if grad is not None:
                execution_moves += float(grad.index_select(axis, torch.tensor(list(EXECUTION))).abs().sum())
                direction_moves += float(grad.select(axis, Branch.DIRECTION).abs().sum())
        assert direction_moves > 0
        assert (execution_moves == 0) == shaping_only


def test_the_torch_func_update_gives_the_eager_gradients_with_both_switches(make_learner) -> None:
    """`[learner] compile = true` runs the functional form: with per-sample branch weights and the regret it
    must give the eager loop's gradient."""
    from foxhunt.learner.functional import FunctionalGradients

    learner = make_learner(dtype=torch.float64, execution_regret=True, shaping_only=True)
    batch = learner.sample(32)
    support = learner.update_support()
    targets = learner.normalised_targets(batch, support, learner._taus(32, learner.config.n_target_quantiles))
    taus = learner._taus(32, learner.config.n_quantiles)
    reference = learner.loop_gradients(batch, support, taus, targets)
    functional = FunctionalGradients(learner.network, learner.components, learner.priority_component,
                                     learner.gradients.limits, learner.config.max_grad_norm, learner.input_sources,
                                     learner.reach_groups())
    step = functional(learner.param_dict, batch, support, taus, targets)
    torch.testing.assert_close(reference.budgeted.flat, step.budgeted.flat, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(reference.losses, step.losses)


def test_the_cpu_profile_switches_them_on_and_the_config_classes_keep_them_off() -> None:
    from foxhunt.config import load_config
    from foxhunt.learner.config import LearnerConfig

    assert (LearnerConfig().execution_regret, LearnerConfig().shaping_only) == (False, False)
    cpu = load_config(None, ['run.device="cpu"'])
    assert (cpu.learner.execution_regret, cpu.learner.shaping_only) == (True, True)
    off = load_config(None, ['run.device="cpu"', "learner.execution_regret=false", "learner.shaping_only=false"])
    assert (off.learner.execution_regret, off.learner.shaping_only) == (False, False)


def test_a_learner_with_both_switches_updates_and_stays_finite(make_learner) -> None:
    learner = make_learner(execution_regret=True, shaping_only=True)
    before = [p.detach().clone() for p in learner.network.parameters()]
    for _ in range(3):
        learner.step(32)
    after = list(learner.network.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize("seed", range(4))
def test_branch_rewards_against_a_float64_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rewards, executions = rng.normal(size=17), rng.normal(size=17)
    got = branch_rewards(torch.tensor(rewards), torch.tensor(executions), execution_columns(dtype=torch.float64))
    expected = np.empty((17, len(Branch)))
    for i in range(17):
        for branch in Branch:
            expected[i, branch] = executions[i] if branch in EXECUTION_BRANCHES else rewards[i] - executions[i]
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-12)
    # the position's part and the execution's part add up to the reward
    np.testing.assert_allclose((got[:, Branch.DIRECTION] + got[:, Branch.ORDER_TYPE]).numpy(), rewards, atol=1e-12)


def test_the_split_and_the_regret_cannot_both_price_the_direction() -> None:
    from foxhunt.learner.config import LearnerConfig

    with pytest.raises(ValueError, match="learner.execution_regret=false"):
        LearnerConfig(reward_split=True, execution_regret=True)
    assert LearnerConfig().reward_split is False
    assert LearnerConfig(reward_split=True, shaping_only=True).reward_split
