"""The conviction floor (``[learner] conviction_floor``): the greedy direction against a float64 reference, the same
floor on every acting path (learner, policy, exported module), and nothing added when it is off."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.actions import Branch, Direction
from foxhunt.features import Normalizer
from foxhunt.learner import LearnerConfig
from foxhunt.learner.conviction import with_conviction_floor
from foxhunt.policy import Policy
from foxhunt.policy_export import GreedyPolicy

N_DIRECTIONS = Direction.size()


def reference_direction(q: np.ndarray, mu: float, sigma: float, floor: float) -> int:
    """HOLD unless another direction's unnormalised Q beats HOLD's by more than floor·σ; then the best of them."""
    values = q * sigma + mu
    best = int(np.argmax(values))
    if best == Direction.HOLD or values[best] <= values[Direction.HOLD] + floor * sigma:
        return int(Direction.HOLD)
    return best


@settings(deadline=None)
@given(floor=st.floats(0.0, 3.0), seed=st.integers(0, 2**31 - 1))
def test_the_greedy_direction_matches_a_float64_reference(floor: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, width = 32, 5
    q = rng.normal(size=(n, len(Branch), width))
    q[:, :, N_DIRECTIONS:] = -np.inf  # the direction branch has 4 real actions of 5 slots
    mu, sigma = rng.normal(size=len(Branch)), rng.uniform(0.1, 3.0, size=len(Branch))
    shaped = with_conviction_floor(torch.from_numpy(q), floor) * torch.from_numpy(sigma)[:, None] + torch.from_numpy(mu)[:, None]
    actions = shaped.argmax(-1).numpy()
    for i in range(n):
        want = reference_direction(q[i, Branch.DIRECTION, :N_DIRECTIONS], mu[Branch.DIRECTION], sigma[Branch.DIRECTION], floor)
        assert actions[i, Branch.DIRECTION] == want
        for branch in Branch:  # the other branches are untouched
            if branch != Branch.DIRECTION:
                assert actions[i, branch] == int(np.argmax(q[i, branch]))


def test_the_learner_and_its_policy_act_with_the_floor(make_learner, kit) -> None:
    plain = make_learner(seed=2, dtype=torch.float64)
    floored = make_learner(seed=2, dtype=torch.float64, conviction_floor=0.7)
    for _ in range(3):
        plain.step(32)
        floored.step(32)  # the floor shapes acting only: both learners train identically
    for a, b in zip(plain.params, floored.params, strict=True):
        assert torch.equal(a, b)
    obs = torch.randn(50, kit.obs_dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    base, shaped = plain.act_values(obs), floored.act_values(obs)
    expected = base.clone()
    expected[:, Branch.DIRECTION, Direction.HOLD] += 0.7 * floored.popart.sigma[Branch.DIRECTION]
    torch.testing.assert_close(shaped, expected, rtol=1e-12, atol=1e-12)
    policy = Policy.of_learner(floored, Normalizer(np.zeros(1), np.ones(1)), {})
    assert torch.equal(policy.act_values(obs), shaped)
    exported = GreedyPolicy(policy.network, policy.support(), policy.popart.mu, policy.popart.sigma,
                            policy.config.conviction_floor)
    actions, values = exported(obs)
    assert torch.equal(actions, shaped.argmax(-1))
    torch.testing.assert_close(values, shaped, rtol=1e-12, atol=1e-12)


def test_off_adds_nothing_and_bad_floors_are_refused(make_learner, kit) -> None:
    assert LearnerConfig().conviction_floor == 0.0
    learner = make_learner(seed=1)
    obs = torch.randn(20, kit.obs_dim, generator=torch.Generator().manual_seed(3))
    raw = learner.popart.unnormalize_q(learner.network.expected_q(obs, learner.support()))
    assert torch.equal(learner.act_values(obs), raw)
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="conviction_floor"):
            LearnerConfig(conviction_floor=bad)
