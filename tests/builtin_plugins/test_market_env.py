"""The market_env plugin: its declarations and the kernel record that drives VectorEnv."""

from __future__ import annotations

import numpy as np
import torch

from foxhunt.data.instrument import preset
from foxhunt.env import EP, PS, RNG, EnvConfig, PortfolioObs, VectorEnv
from foxhunt.env.tables import PLAN
from foxhunt.plugin.records import KernelPoint
from foxhunt.plugin.registrar import Declarations, Registrar
from foxhunt.state import ResetCategory
from foxhunt_plugins import market_env


def test_declares_tables_and_state() -> None:
    declarations = Declarations()
    market_env.foxhunt_declare(Registrar("market_env", declarations))
    assert declarations.problems == []
    assert {name: table for name, (_, table) in declarations.dims.items()} == {
        "PS": PS, "EP": EP, "RNG": RNG, "PortfolioObs": PortfolioObs, "PLAN": PLAN
    }
    categories = {entry.name: entry.category for entry in declarations.states}
    assert categories == {
        market_env.PORTFOLIO_STATE: ResetCategory.FOLD_RESET,
        market_env.PLAN_STATE: ResetCategory.FOLD_RESET,
        market_env.RNG_STATE: ResetCategory.TRAINING_PERSIST,
    }


def test_kernel_record_steps_the_environment_like_the_default() -> None:
    (kernel,) = market_env.foxhunt_kernels(None)
    assert kernel.point is KernelPoint.ENV_STEP and kernel.name == market_env.STEP_KERNEL
    rng = np.random.default_rng(0)
    bars = 64
    close = 100 + np.cumsum(rng.normal(size=bars))
    prices = np.stack([close, close + 1, close - 1, close], axis=1)
    features = rng.normal(size=(bars, 2)).astype(np.float32)
    config = EnvConfig(n_envs=8, episode_bars=10)
    plugged = VectorEnv(prices, features, preset("ES"), config, seed=3, step_kernel=kernel.run)
    default = VectorEnv(prices, features, preset("ES"), config, seed=3)
    for env in (plugged, default):
        env.reset()
    for _ in range(12):
        actions = torch.from_numpy(rng.integers(0, [4, 3, 2, 3], size=(8, 4)))
        plugged.step(actions)
        default.step(actions)
    assert torch.equal(plugged.state, default.state) and torch.equal(plugged.obs, default.obs)
    market_env.reset_portfolio(plugged)  # the fold-reset dispatch starts new episodes
    assert bool((plugged.state[:, PS.EQUITY] == config.initial_cash).all())
