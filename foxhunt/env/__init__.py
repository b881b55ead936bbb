"""The vectorised futures environment, its scalar reference and the backtest (exploration is the agent's:
:mod:`foxhunt.learner.exploration`).

See ``docs/fill-model.md`` for the physics and ``docs/kernels.md`` for how the
step kernel runs on the CPU and on CUDA.
"""

from __future__ import annotations

from foxhunt.env.backtest import BacktestReport, BacktestResult, backtest, backtest_with_baselines, constant_policy
from foxhunt.env.config import EnvConfig, physics_params
from foxhunt.env.oracle import ThresholdPolicy, oracle_backtest, oracle_policy, oracle_targets
from foxhunt.env.kernel import ENV_RESET, ENV_SIGNALS, ENV_STEP, run_env_reset, run_env_step
from foxhunt.env.reference import ReferenceEnv
from foxhunt.env.tables import EP, OHLCV, PS, RNG, PortfolioObs
from foxhunt.env.vector import VectorEnv, env_keys

__all__ = [
    "BacktestReport",
    "BacktestResult",
    "ENV_RESET",
    "ENV_SIGNALS",
    "ENV_STEP",
    "EP",
    "EnvConfig",
    "OHLCV",
    "PS",
    "PortfolioObs",
    "RNG",
    "ReferenceEnv",
    "ThresholdPolicy",
    "VectorEnv",
    "backtest",
    "backtest_with_baselines",
    "constant_policy",
    "env_keys",
    "oracle_backtest",
    "oracle_policy",
    "oracle_targets",
    "physics_params",
    "run_env_reset",
    "run_env_step",
]
