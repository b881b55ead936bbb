"""``import foxhunt.gym`` registers foxhunt/Futures-v0 for gymnasium.make and gymnasium.make_vec."""

from __future__ import annotations

import gymnasium
import numpy as np

from foxhunt.gym import ENV_ID, FoxhuntEnv, FoxhuntVectorEnv


def test_make_builds_the_single_env_and_make_vec_the_batched_one(source, overrides):
    env = gymnasium.make(ENV_ID, data=source, overrides=overrides)
    assert isinstance(env.unwrapped, FoxhuntEnv)
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape
    envs = gymnasium.make_vec(ENV_ID, num_envs=8, data=source, overrides=overrides)
    assert isinstance(envs, FoxhuntVectorEnv) and envs.num_envs == 8
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (8, *env.observation_space.shape)
    _, rewards, *_ = envs.step(envs.action_space.sample())
    assert rewards.shape == (8,) and np.all(np.isfinite(rewards))


def test_the_module_prefixed_id_works_for_code_that_never_imports_foxhunt_gym(source, overrides):
    # Gymnasium imports the module named before the colon, which registers the id, then makes the env.
    env = gymnasium.make(f"foxhunt.gym:{ENV_ID}", data=source, overrides=overrides)
    assert isinstance(env.unwrapped, FoxhuntEnv)
    assert env.spec.vector_entry_point == "foxhunt.gym.vector:FoxhuntVectorEnv"
