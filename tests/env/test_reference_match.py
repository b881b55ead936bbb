"""The vectorised kernel agrees with one scalar reference per environment (CPU and CUDA/simulator)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from env_builders import TEST_INSTRUMENT, random_actions, synthetic_market
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.env import EnvConfig, ReferenceEnv, VectorEnv, env_keys

CONFIG = EnvConfig(
    n_envs=6, episode_bars=25, max_contracts=6, w_holding=1.5, w_churn=20.0, churn_bars=4, w_drawdown=0.5,
    kelly_warmup_trades=3, margin_fraction=0.8,
)


def run_both(seed: int, steps: int, config: EnvConfig, backend: str | None, device: str = "cpu", health: float = 1.0,
             execution_part: bool = False):
    prices, features = synthetic_market(seed, bars=120)
    window = (5, 110)
    env = VectorEnv(
        prices, features, TEST_INSTRUMENT, config, window=window, seed=seed, dtype=torch.float64,
        device=device, backend=backend, health=torch.full((1,), health, device=device), execution_part=execution_part,
    )
    references = [
        ReferenceEnv(prices, features, TEST_INSTRUMENT, config, window=window, key=int(k), health=health,
                     execution_part=execution_part)
        for k in env_keys(seed, config.n_envs)
    ]
    rng = np.random.default_rng(seed + 1)
    obs = env.reset().cpu().numpy()
    for i, reference in enumerate(references):
        np.testing.assert_allclose(obs[i], reference.reset(), rtol=1e-6, atol=1e-6)
    for step in range(steps):
        actions = random_actions(rng, config.n_envs)
        obs, reward, done = (t.cpu().numpy() for t in env.step(torch.from_numpy(actions).to(device)))
        state = env.state.cpu().numpy()
        for i, reference in enumerate(references):
            expected_obs, expected_reward, expected_done = reference.step(actions[i])
            where = f"step {step}, env {i}"
            assert bool(done[i]) == expected_done, where
            np.testing.assert_allclose(state[i], reference.portfolio.as_row(), rtol=1e-9, atol=1e-6, err_msg=where)
            np.testing.assert_allclose(reward[i], expected_reward, rtol=1e-9, atol=1e-9, err_msg=where)
            np.testing.assert_allclose(obs[i], expected_obs, rtol=1e-5, atol=1e-5, err_msg=where)


@settings(max_examples=6)
@given(seed=st.integers(0, 2**31 - 1), health=st.sampled_from([0.0, 0.5, 1.0]), execution_part=st.booleans())
def test_cpu_kernel_matches_reference(seed: int, health: float, execution_part: bool) -> None:
    run_both(seed, steps=60, config=CONFIG, backend="cpu", health=health, execution_part=execution_part)


def test_cpu_kernel_matches_reference_without_margin_or_costs() -> None:
    free = EnvConfig(n_envs=4, episode_bars=40, commission=0.0, slippage_ticks=0.0, kelly_warmup_trades=0)
    run_both(3, steps=50, config=free, backend="cpu")


def test_cuda_kernel_matches_reference() -> None:
    # On a GPU machine this is the real CUDA kernel; elsewhere the numba simulator (tiny sizes).
    if torch.cuda.is_available():
        for execution_part in (False, True):
            run_both(11, steps=60, config=CONFIG, backend="cuda", device="cuda", execution_part=execution_part)
    else:
        small = EnvConfig(n_envs=3, episode_bars=6, w_churn=20.0, kelly_warmup_trades=2, max_contracts=4)
        run_both(11, steps=14, config=small, backend="cudasim", execution_part=True)


@pytest.mark.parametrize("dtype", [torch.float32])
def test_float32_tracks_float64(dtype: torch.dtype) -> None:
    prices, features = synthetic_market(5, bars=120)
    config = EnvConfig(n_envs=8, episode_bars=400, commission=1.0)
    envs = [VectorEnv(prices, features, TEST_INSTRUMENT, config, seed=5, dtype=d) for d in (dtype, torch.float64)]
    rng = np.random.default_rng(0)
    for env in envs:
        env.reset()
    for _ in range(20):
        actions = torch.from_numpy(random_actions(rng, config.n_envs))
        for env in envs:
            env.step(actions)
    low, high = (env.state.double() for env in envs)
    torch.testing.assert_close(low, high, rtol=1e-5, atol=0.5)


def test_cuda_buffers_are_stored_by_column_and_cpu_buffers_by_row() -> None:
    # The simulator runs the CUDA layout on CPU tensors; a real GPU run checks the same on CUDA tensors.
    prices, features = synthetic_market(2, bars=60)
    config = EnvConfig(n_envs=5, episode_bars=8)
    cuda_backend, cuda_device = ("cuda", "cuda") if torch.cuda.is_available() else ("cudasim", "cpu")
    by_row = VectorEnv(prices, features, TEST_INSTRUMENT, config, seed=4, dtype=torch.float64, backend="cpu")
    by_column = VectorEnv(prices, features, TEST_INSTRUMENT, config, seed=4, dtype=torch.float64,
                          backend=cuda_backend, device=cuda_device)
    for name in ("state", "rng", "actions", "obs"):
        assert getattr(by_row, name).is_contiguous(), name
        assert getattr(by_column, name).stride() == (1, config.n_envs), name
    by_row.reset()
    by_column.reset()
    rng = np.random.default_rng(9)
    for _ in range(10):
        actions = torch.from_numpy(random_actions(rng, config.n_envs))
        by_row.step(actions)
        by_column.step(actions.to(cuda_device))
    for name in ("state", "obs", "reward", "done"):
        np.testing.assert_allclose(getattr(by_column, name).cpu().numpy(), getattr(by_row, name).numpy(),
                                   rtol=1e-12, atol=1e-9, err_msg=name)
