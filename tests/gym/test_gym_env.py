"""FoxhuntEnv: one episode at a time, accepted by Gymnasium's own environment checker."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.gym import FoxhuntEnv

FLAT = np.array([0] * Branch.size(), dtype=np.int64)
FLAT[Branch.DIRECTION], FLAT[Branch.MAGNITUDE] = Direction.FLAT, Magnitude.FULL
FLAT[Branch.ORDER_TYPE], FLAT[Branch.URGENCY] = OrderType.MARKET, Urgency.NORMAL


@pytest.fixture(scope="module")
def env(source, overrides) -> FoxhuntEnv:
    return FoxhuntEnv(source, overrides=overrides)


def test_gymnasiums_env_checker_passes(env):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    # The only remarks: the observation's portfolio part (unrealised P&L, drawdown) has no bound.
    remarks = {str(w.message) for w in caught}
    assert all("infinity" in remark for remark in remarks), remarks


@pytest.mark.parametrize("policy", ["random", "flat"])
def test_an_episode_loop_runs_with_finite_rewards_and_the_declared_types(env, policy):
    env.action_space.seed(0)
    obs, info = env.reset(seed=0)
    episodes = 0
    for _ in range(200):
        action = env.action_space.sample() if policy == "random" else FLAT
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs in env.observation_space
        assert isinstance(reward, float) and np.isfinite(reward)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert set(info) == {"position", "equity", "cost", "bar"}
        if policy == "flat":
            assert reward == 0.0 and info["position"] == 0.0 and info["equity"] == 100_000.0
        if terminated or truncated:
            episodes += 1
            obs, info = env.reset()
    assert episodes >= 4  # 40-bar episodes


def test_a_finished_episode_returns_its_last_observation_not_the_next_ones_first(env):
    obs, info = env.reset(seed=1)
    start = info["bar"]
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(FLAT)
        done = terminated or truncated
    assert info["bar"] > start  # the bar the episode ended at, not a new start
    again, _, terminated, truncated, _ = env.step(FLAT)
    np.testing.assert_array_equal(again, obs)  # finished until reset()
    assert terminated or truncated


def test_a_malformed_action_is_refused_with_its_shape_or_branch(env):
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have shape \(4,\)"):
        env.step(np.zeros(3, dtype=np.int64))
    too_far = FLAT.copy()
    too_far[Branch.URGENCY] = 3
    with pytest.raises(ValueError, match=r"branch URGENCY, is 3; it must be in 0\.\.2 \(0 PASSIVE, 1 NORMAL, 2 AGGRESSIVE\)"):
        env.step(too_far)
    with pytest.raises(ValueError, match="takes no options"):
        env.reset(options={"window": "test"})
