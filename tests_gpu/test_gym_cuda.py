"""The Gymnasium vector env on CUDA tensors: the same episode as on the CPU, step for step.

Run on an NVIDIA machine (not collected by the CPU suite)::

    python3 -m pytest -q tests_gpu/test_gym_cuda.py
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.gym import FoxhuntVectorEnv

SOURCE = "synthetic:ar1?bars=2000&seed=1"
OVERRIDES = ("features.cache=false", "folds.n_folds=1", "folds.train_bars=1000", "folds.validation_bars=200",
             "folds.test_bars=200", "env.episode_bars=40")
N_ENVS, STEPS = 64, 120


def test_cuda_tensors_follow_the_cpu_episode_step_for_step() -> None:
    if not torch.cuda.is_available():
        pytest.fail("tests_gpu needs an NVIDIA GPU; run it on the device machine")
    cpu = FoxhuntVectorEnv(N_ENVS, SOURCE, overrides=OVERRIDES, seed=3)
    cuda = FoxhuntVectorEnv(N_ENVS, SOURCE, overrides=OVERRIDES, seed=3, device="cuda", tensors=True)
    cpu.action_space.seed(7)
    obs_cpu, _ = cpu.reset(seed=7)
    obs_cuda, _ = cuda.reset(seed=7)
    assert obs_cuda.device.type == "cuda"
    np.testing.assert_allclose(obs_cuda.cpu().numpy(), obs_cpu, rtol=1e-5, atol=1e-5)
    for _ in range(STEPS):
        actions = cpu.action_space.sample()
        obs_cpu, rewards_cpu, term_cpu, trunc_cpu, _ = cpu.step(actions)
        obs_cuda, rewards_cuda, term_cuda, trunc_cuda, _ = cuda.step(torch.as_tensor(actions, device="cuda"))
        assert rewards_cuda.device.type == "cuda"
        np.testing.assert_allclose(obs_cuda.cpu().numpy(), obs_cpu, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(rewards_cuda.cpu().numpy(), rewards_cpu, rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(term_cuda.cpu().numpy(), term_cpu)
        np.testing.assert_array_equal(trunc_cuda.cpu().numpy(), trunc_cpu)
