"""Built-in plugin: the futures market environment's physics kernel.

It publishes the environment's named-dimension tables, registers the
portfolio state (reset at every fold: each fold starts with fresh episodes)
and the per-environment random streams (kept across folds, so a new fold
draws new start bars), and returns the step kernel for ``KernelPoint.ENV_STEP``.
The environment also holds each episode's trade plan (``plan [envs, PLAN]``), registered here beside the
portfolio: all zero unless the trade_plans plugin is on, whose step kernel replaces this one and honours plans
(``foxhunt.env.plans``).

The physics itself lives in ``foxhunt.env`` (core, so the backtest and the
scalar reference can use it without importing a plugin); this plugin is how a
run selects it. That physics holds foxhunt's one Kelly position sizing: each
environment's Kelly fraction and position cap (``kelly_fraction`` and
``position_cap`` in ``foxhunt.env.physics``, set by the ``[env] kelly_*`` keys,
docs/fill-model.md), scaled by the learning-health safety factor there. The
kernel's ``run(context)`` expects the signals that :class:`foxhunt.env.VectorEnv`
puts in its context (``foxhunt.env.kernel.ENV_SIGNALS``).
"""

from __future__ import annotations

from typing import Any

from foxhunt.env.kernel import ENV_SIGNALS, run_env_step
from foxhunt.env.tables import EP, PLAN, RNG, PS, PortfolioObs
from foxhunt import Kernel, KernelPoint, ResetCategory, hookimpl

__all__ = ["foxhunt_declare", "foxhunt_kernels", "reset_portfolio", "reset_plans", "PORTFOLIO_STATE", "PLAN_STATE",
           "RNG_STATE", "STEP_KERNEL"]

PORTFOLIO_STATE = "market_env.portfolio"
PLAN_STATE = "market_env.plans"
RNG_STATE = "market_env.rng"
STEP_KERNEL = "market_env.step"


def reset_portfolio(env: Any) -> None:
    """Fold-reset dispatch: every environment starts a new episode in the (new) training window."""
    env.reset()


def reset_plans(env: Any) -> None:
    """Fold-reset dispatch: no trade plan is open (the step also clears one whenever an episode ends)."""
    env.plan.zero_()


@hookimpl
def foxhunt_declare(registrar: Any) -> None:
    for table in (PS, EP, RNG, PortfolioObs, PLAN):
        registrar.dims(table)
    registrar.state(
        PORTFOLIO_STATE,
        ResetCategory.FOLD_RESET,
        reset=reset_portfolio,
        doc="Portfolio rows [envs, PS], observations, rewards and done flags of the vectorised environment.",
    )
    registrar.state(
        PLAN_STATE,
        ResetCategory.FOLD_RESET,
        reset=reset_plans,
        doc="Trade plans [envs, PLAN] (all 0 without the trade_plans plugin); cleared at every episode's end too.",
    )
    registrar.state(
        RNG_STATE,
        ResetCategory.TRAINING_PERSIST,
        doc="Per-environment counter-based random streams [envs, RNG]; counters only advance.",
    )


@hookimpl
def foxhunt_kernels(config: Any) -> list[Kernel]:
    return [
        Kernel(
            name=STEP_KERNEL,
            point=KernelPoint.ENV_STEP,
            run=run_env_step,
            description=(
                "Advances every episode by one bar in one launch: decision at bar t's close, fill on bar t+1 "
                "(docs/fill-model.md), costs, margin and Kelly caps, reward, auto-reset. Signals: "
                + ", ".join(ENV_SIGNALS)
            ),
            reads=ENV_SIGNALS,
        )
    ]
