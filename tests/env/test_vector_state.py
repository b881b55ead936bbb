"""A VectorEnv's state_dict, loaded into a fresh environment, continues every episode bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from env_builders import TEST_INSTRUMENT, random_actions, synthetic_market

from foxhunt.env import EnvConfig, VectorEnv
from foxhunt.errors import CheckpointError

CONFIG = EnvConfig(n_envs=4, episode_bars=12)  # short episodes: the steps below cross resets and redraws


def steps(env: VectorEnv, actions: list[np.ndarray]) -> list[tuple[torch.Tensor, ...]]:
    out = []
    for step_actions in actions:
        obs, reward, done = env.step(torch.from_numpy(step_actions))
        out.append((obs.clone(), reward.clone(), done.clone(), env.state.clone()))
    return out


def test_a_restored_environment_continues_as_the_original() -> None:
    prices, features = synthetic_market(5, bars=300)
    rng = np.random.default_rng(0)
    before, after = ([random_actions(rng, CONFIG.n_envs) for _ in range(n)] for n in (17, 30))
    original = VectorEnv(prices, features, TEST_INSTRUMENT, CONFIG, window=(20, 280), seed=7)
    original.reset()
    steps(original, before)
    saved = {name: tensor.clone() for name, tensor in original.state_dict().items()}
    restored = VectorEnv(prices, features, TEST_INSTRUMENT, CONFIG, seed=99)  # another seed and window
    restored.reset()
    restored.load_state_dict(saved)
    expected, got = steps(original, after), steps(restored, after)
    assert any(bool(done.any()) for _, _, done, _ in expected)  # episodes ended and restarted from the streams
    for one, other in zip(expected, got, strict=True):
        for a, b in zip(one, other, strict=True):
            assert torch.equal(a, b)


def test_a_state_of_another_size_is_refused_before_anything_is_copied() -> None:
    prices, features = synthetic_market(5, bars=300)
    env = VectorEnv(prices, features, TEST_INSTRUMENT, CONFIG, seed=7)
    env.reset()
    before = {name: tensor.clone() for name, tensor in env.state_dict().items()}
    smaller = VectorEnv(prices, features, TEST_INSTRUMENT, EnvConfig(n_envs=2, episode_bars=12), seed=3)
    state = {name: tensor.clone() for name, tensor in smaller.state_dict().items()}
    state["state"] = before["state"].clone() + 1.0  # right shape and first in the dict: checked, not copied
    with pytest.raises(CheckpointError, match=r"environment state 'rng' is torch\.int64 \(2, \d+\), expected"):
        env.load_state_dict(state)
    for name, tensor in env.state_dict().items():
        assert torch.equal(tensor, before[name]), name
