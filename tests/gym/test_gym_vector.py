"""FoxhuntVectorEnv: Gymnasium's vector API over foxhunt's own VectorEnv, step for step."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency, branch_sizes
from foxhunt.env.tables import PS
from foxhunt.env.vector import VectorEnv
from foxhunt.gym import FoxhuntVectorEnv

N_ENVS = 8
STEPS = 200


def flat_actions(n_envs: int) -> np.ndarray:
    actions = np.zeros((n_envs, Branch.size()), dtype=np.int64)
    actions[:, Branch.DIRECTION] = Direction.FLAT
    actions[:, Branch.MAGNITUDE] = Magnitude.FULL
    actions[:, Branch.ORDER_TYPE] = OrderType.MARKET
    actions[:, Branch.URGENCY] = Urgency.NORMAL
    return actions


@pytest.fixture(scope="module")
def envs(source, overrides) -> FoxhuntVectorEnv:
    return FoxhuntVectorEnv(N_ENVS, source, overrides=overrides, seed=11)


def test_spaces_are_the_branches_and_the_trainers_observation_width(envs):
    assert envs.single_action_space.nvec.tolist() == list(branch_sizes())
    assert envs.action_space.shape == (N_ENVS, Branch.size())
    assert envs.single_observation_space.shape == (envs.core.observation_size,)
    assert envs.observation_space.shape == (N_ENVS, envs.core.observation_size)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


@pytest.mark.parametrize("policy", ["random", "flat"])
def test_a_plain_policy_runs_with_finite_rewards_and_the_declared_shapes(envs, policy):
    envs.action_space.seed(5)
    obs, _ = envs.reset(seed=5)
    assert obs in envs.observation_space
    finished = 0
    for _ in range(STEPS):
        actions = envs.action_space.sample() if policy == "random" else flat_actions(N_ENVS)
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        assert obs.shape == (N_ENVS, envs.core.observation_size) and obs.dtype == np.float32
        assert rewards.shape == (N_ENVS,) and rewards.dtype == np.float64
        assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
        assert np.all(np.isfinite(obs)) and np.all(np.isfinite(rewards))
        if "final_obs" in infos:
            ended = terminated | truncated
            np.testing.assert_array_equal(infos["_final_obs"], ended)
            assert all(infos["final_obs"][i].shape == obs.shape[1:] for i in np.flatnonzero(ended))
            finished += int(ended.sum())
        if policy == "flat":
            assert np.all(rewards == 0.0) and np.all(infos["position"] == 0.0)
    assert finished >= N_ENVS  # episodes of 40 bars: every environment finished at least once in 200 steps


def test_matches_foxhunts_vector_env_step_for_step(source, overrides):
    # The 200-bar validation window truncates episodes that start late in it, so episodes end at different
    # steps and the same-step autoreset restarts some environments while the others keep trading.
    envs = FoxhuntVectorEnv(4, source, overrides=overrides, seed=7, window="validation")
    market = envs.market
    config = attrs.evolve(market.config.env, n_envs=4)
    core = VectorEnv(market.market.ohlcv, market.features, market.market.instrument, config, window=market.window,
                     seed=7)
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=7)
    np.testing.assert_array_equal(obs, core.reset().numpy())
    partial_resets = 0
    for _ in range(STEPS):
        actions = rng.integers(0, branch_sizes(), size=(4, Branch.size()))
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        core_obs, core_reward, core_done = core.step(torch.from_numpy(actions))
        np.testing.assert_array_equal(obs, core_obs.numpy())
        np.testing.assert_array_equal(rewards, core_reward.numpy().astype(np.float64))
        np.testing.assert_array_equal(terminated | truncated, core_done.numpy())
        np.testing.assert_array_equal(infos["position"], core.state[:, PS.POSITION].numpy())
        np.testing.assert_array_equal(infos["equity"], core.state[:, PS.EQUITY].numpy())
        ended = int(core_done.sum())
        partial_resets += 0 < ended < 4
    assert partial_resets >= 3  # the comparison went through resets of some environments beside running ones


def test_reset_with_a_seed_repeats_and_another_seed_differs(envs):
    first, infos = envs.reset(seed=3)
    again, infos_again = envs.reset(seed=3)
    other, infos_other = envs.reset(seed=4)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(infos["bar"], infos_again["bar"])
    assert not np.array_equal(infos["bar"], infos_other["bar"])


def test_tensor_outputs_hold_the_same_values_as_numpy(source, overrides):
    arrays = FoxhuntVectorEnv(4, source, overrides=overrides)
    tensors = FoxhuntVectorEnv(4, source, overrides=overrides, tensors=True)
    obs, _ = arrays.reset(seed=2)
    obs_t, _ = tensors.reset(seed=2)
    assert isinstance(obs_t, torch.Tensor) and obs_t.device == tensors.device
    np.testing.assert_array_equal(obs, obs_t.numpy())
    actions = np.random.default_rng(1).integers(0, branch_sizes(), size=(20, 4, Branch.size()))
    for batch in actions:
        step = arrays.step(batch)
        step_t = tensors.step(torch.from_numpy(batch))
        for value, tensor in zip(step[:4], step_t[:4], strict=True):
            np.testing.assert_array_equal(value, tensor.numpy().astype(value.dtype))


def test_disabled_autoreset_holds_a_finished_env_until_its_mask_resets_it(source, overrides):
    envs = FoxhuntVectorEnv(2, source, overrides=overrides, autoreset_mode="Disabled")
    envs.reset(seed=0)
    ended = np.zeros(2, dtype=bool)
    while not ended.any():
        obs, rewards, terminated, truncated, infos = envs.step(flat_actions(2))
        ended = terminated | truncated
    assert "final_obs" not in infos
    held = obs.copy()
    obs, rewards, terminated, truncated, _ = envs.step(flat_actions(2))
    np.testing.assert_array_equal(obs[ended], held[ended])
    assert np.all(rewards[ended] == 0.0) and np.all((terminated | truncated)[ended])
    running = obs[~ended].copy()
    obs, infos = envs.reset(options={"reset_mask": ended})
    np.testing.assert_array_equal(infos["_bar"], ended)
    np.testing.assert_array_equal(obs[~ended], running)
    _, _, terminated, truncated, _ = envs.step(flat_actions(2))
    assert not np.any((terminated | truncated)[ended])
