"""Trade plans: the intent an entry carries across bars, honoured by the environment's step.

When the ``trade_plans`` plugin is on, a position the agent opens (from flat, or by reversing) carries a plan:
a stop and a target at fixed fractions of the entry's fill price and a horizon in bars (the columns of
``PLAN_PARAM``, read from the ``trade_plans.params`` ISV slot). While the agent holds the position, the plan's
exits work on every bar: the horizon closes it at the next open, the stop sells a long (buys back a short) when
a bar reaches it, the target when a bar trades through it. An action that changes the position replaces the plan
for that bar: the agent's order is executed, not the plan's. ``docs/fill-model.md``, "Trade plans", has the
rules; :class:`foxhunt.env.reference.ReferenceEnv` (``plans=``) is their float64 transcription.

The plan of each environment is a row of ``plan [envs, PLAN]`` (``foxhunt.env.tables.PLAN``). A plan opens only
when the entry's conviction, the share of the cap its magnitude asked for, reaches the ``trade_plans.threshold``
ISV slot, so an adaptive plugin can move it while the run trains.

One step function serves the training environment and every backtest: :func:`run_plan_step`, the trade_plans
plugin's ``ENV_STEP`` kernel, which replaces ``market_env.step`` when that plugin is enabled; the plain step
(:mod:`foxhunt.env.kernel`) is not touched by plans. Both share their order and bookkeeping code
(``agent_order`` and ``settle`` in :mod:`foxhunt.env.physics`).
"""

from __future__ import annotations

import torch

from foxhunt import contract
from foxhunt.errors import FoxhuntError
from foxhunt.env import tables
from foxhunt.env.kernel import ENV_SIGNALS
from foxhunt.env.physics import (
    EP,
    OHLCV,
    ONE,
    PS,
    ZERO,
    Branch,
    HALF,
    Magnitude,
    QUARTER,
    agent_order,
    larger,
    settle,
    smaller,
    target_position,
    urgency_slippage,
)
from foxhunt.actions import Urgency as _Urgency
from foxhunt.isv import ISV, IsvLayout, Slot
from foxhunt.kernels.context import KernelContext
from foxhunt.kernels.dual import DualKernel, device_constants, device_function

__all__ = [
    "PLAN",
    "PLAN_PARAM",
    "NO_EXIT",
    "STOP_EXIT",
    "TARGET_EXIT",
    "EXPIRY_EXIT",
    "conviction_of",
    "plan_exit",
    "env_step_plans_row",
    "PLAN_STEP",
    "plans_on",
    "run_plan_step",
    "plan_isv",
]

PLAN = device_constants(tables.PLAN)
PLAN_PARAM = device_constants(tables.PLAN_PARAM)

# What ended a plan on a bar (plan_exit's first value).
NO_EXIT = 0
STOP_EXIT = 1
TARGET_EXIT = 2
EXPIRY_EXIT = 3

_NORMAL = int(_Urgency.NORMAL)  # a plan's stop and horizon exits are market orders at NORMAL urgency


@device_function
def conviction_of(magnitude):
    """The share of the cap a LONG or SHORT of ``magnitude`` targets: the entry's conviction (unknown: FULL)."""
    if magnitude == Magnitude.QUARTER:
        return QUARTER
    if magnitude == Magnitude.HALF:
        return HALF
    return ONE


@device_function
def plan_exit(prices, plan, i, plan_params, bar, bar_float, open1, plan_side):
    """Which exit of environment ``i``'s open plan works on bar ``bar + 1``, and its reference price.

    Returns ``(kind, price)``. Checked in this order, each from what is known when it acts: the horizon (decided
    at bar ``bar``'s close, filled at the next open), the stop (a stop order: it fires when the bar reaches it
    and fills at the stop, or at the open when the bar opens beyond it), the target (a resting limit order: it
    fills when the bar trades through it, at the target or at a better open). A bar that reaches both the stop
    and the target counts as a stop: a bar's prices do not say which came first.
    """
    if plan_params[PLAN_PARAM.HORIZON] > 0.0 and bar_float >= plan[i, PLAN.EXPIRY]:
        return EXPIRY_EXIT, open1
    if plan_params[PLAN_PARAM.STOP] > 0.0:
        stop = plan[i, PLAN.STOP]
        if plan_side > 0.0:
            if prices[bar + 1, OHLCV.LOW] <= stop:
                return STOP_EXIT, smaller(open1, stop)
        elif prices[bar + 1, OHLCV.HIGH] >= stop:
            return STOP_EXIT, larger(open1, stop)
    if plan_params[PLAN_PARAM.TARGET] > 0.0:
        target = plan[i, PLAN.TARGET]
        if plan_side > 0.0:
            if prices[bar + 1, OHLCV.HIGH] > target:
                return TARGET_EXIT, larger(open1, target)
        elif prices[bar + 1, OHLCV.LOW] < target:
            return TARGET_EXIT, smaller(open1, target)
    return NO_EXIT, open1


@device_function
def _clear_plan(plan, i):
    plan[i, PLAN.SIDE] = ZERO
    plan[i, PLAN.ENTRY] = ZERO
    plan[i, PLAN.STOP] = ZERO
    plan[i, PLAN.TARGET] = ZERO
    plan[i, PLAN.EXPIRY] = ZERO
    plan[i, PLAN.CONVICTION] = ZERO


@device_function
def _clear_counts(plan, i):
    plan[i, PLAN.STOPS] = ZERO
    plan[i, PLAN.TARGETS] = ZERO
    plan[i, PLAN.EXPIRIES] = ZERO


@device_function
def env_step_plans_row(i, args):
    """:func:`foxhunt.env.physics.env_step_row` with trade plans: the plan's exit, or the agent's order."""
    prices, features, state, rng, actions, params, health, obs, reward, done, plan, plan_params, threshold = args
    if done[i] and params[EP.AUTO_RESET] < 0.5:
        reward[i] = ZERO
        state[i, PS.STEP_EXECUTION] = ZERO
        return
    bar_float = state[i, PS.BAR]
    bar = int(bar_float)
    multiplier = params[EP.MULTIPLIER]
    position = state[i, PS.POSITION]
    cap = state[i, PS.CAP]
    target = target_position(actions[i, Branch.DIRECTION], actions[i, Branch.MAGNITUDE], position, cap)
    delta = target - position
    close0 = prices[bar, OHLCV.CLOSE]
    open1 = prices[bar + 1, OHLCV.OPEN]
    close1 = prices[bar + 1, OHLCV.CLOSE]
    plan_side = plan[i, PLAN.SIDE]
    kind = NO_EXIT
    exit_price = open1
    if plan_side != 0.0 and delta == 0.0:  # the agent holds: the plan's exits work this bar
        kind, exit_price = plan_exit(prices, plan, i, plan_params, bar, bar_float, open1, plan_side)
    if kind != NO_EXIT:
        delta = -position
        side = -plan_side
        qty = delta
        fill_price = exit_price
        if kind == TARGET_EXIT:
            per_contract = params[EP.COMMISSION]
        else:
            adverse = params[EP.HALF_SPREAD] + params[EP.SLIPPAGE] * urgency_slippage(params, _NORMAL)
            per_contract = adverse * multiplier + params[EP.COMMISSION]
    else:
        side, qty, fill_price, per_contract = agent_order(prices, i, actions, params, bar, position, cap, delta,
                                                          close0, open1, multiplier)
    settle(i, prices, features, state, rng, params, health, obs, reward, done,
           bar_float, position, delta, side, qty, fill_price, per_contract, close0, open1, close1, multiplier)
    if done[i]:
        _clear_plan(plan, i)
        if params[EP.AUTO_RESET] > 0.5:  # a new episode: its exits are counted from 0
            _clear_counts(plan, i)
        return
    new_position = position + qty
    if kind == STOP_EXIT:
        plan[i, PLAN.STOPS] += ONE
        _clear_plan(plan, i)
    elif kind == TARGET_EXIT:
        plan[i, PLAN.TARGETS] += ONE
        _clear_plan(plan, i)
    elif kind == EXPIRY_EXIT:
        plan[i, PLAN.EXPIRIES] += ONE
        _clear_plan(plan, i)
    elif new_position == 0.0:
        _clear_plan(plan, i)
    elif qty != 0.0 and (position == 0.0 or (position > 0.0) != (new_position > 0.0)):
        # A new position (from flat, or reversed): its plan starts at this fill, if the entry is convinced enough.
        conviction = conviction_of(actions[i, Branch.MAGNITUDE])
        if conviction >= threshold[0]:
            plan_sign = ONE if new_position > 0.0 else -ONE
            plan[i, PLAN.SIDE] = plan_sign
            plan[i, PLAN.ENTRY] = fill_price
            # distance first, then added: (1 - STOP) in the parameters' float32 would round a float64 price's level
            plan[i, PLAN.STOP] = fill_price - plan_sign * plan_params[PLAN_PARAM.STOP] * fill_price
            plan[i, PLAN.TARGET] = fill_price + plan_sign * plan_params[PLAN_PARAM.TARGET] * fill_price
            plan[i, PLAN.EXPIRY] = bar_float + ONE + plan_params[PLAN_PARAM.HORIZON]
            plan[i, PLAN.CONVICTION] = conviction
        else:
            _clear_plan(plan, i)
    # Otherwise (no fill, or a fill that added to or cut the position on its side) the plan carries on unchanged.


PLAN_STEP = DualKernel(env_step_plans_row, "market_env.plan_step", threads_per_block=64)


def plans_on(context: KernelContext) -> bool:
    """Whether ``context`` holds what :func:`run_plan_step` reads: an ISV with the trade plans' slots."""
    layout = context.layout
    return (context.isv is not None and layout is not None and contract.PLAN_PARAMS in layout.offsets
            and contract.PLAN_THRESHOLD in layout.offsets)


def run_plan_step(context: KernelContext) -> None:
    """Advance every environment in ``context.signals`` by one bar with trade plans (one launch, no host sync).

    Reads the environment's buffers (``foxhunt.env.kernel.ENV_SIGNALS``), the plan rows (``env.plan``) and the
    ``trade_plans.params`` and ``trade_plans.threshold`` slots of the context's ISV (zero-copy views). This is
    the trade_plans plugin's ``ENV_STEP`` kernel; :class:`foxhunt.env.VectorEnv` and the backtests give it
    their context, with the run's ISV (``isv=``, ``layout=``).
    """
    if not plans_on(context):
        raise FoxhuntError(
            "trade plans read their parameters and threshold from the ISV, and this kernel context has "
            f"{'no ISV' if context.isv is None else 'an ISV without the slots ' + contract.PLAN_PARAMS + ' and ' + contract.PLAN_THRESHOLD}: "
            "build the environment with the run's ISV (VectorEnv(..., isv=, layout=)), or with foxhunt.env.plans.plan_isv"
        )
    tensors = (*(context.signal(name) for name in ENV_SIGNALS), context.signal(contract.ENV_PLAN),
               context.isv_slot(contract.PLAN_PARAMS), context.isv_slot(contract.PLAN_THRESHOLD))
    PLAN_STEP.launch(context.backend, context.signal(contract.ENV_STATE).shape[0], tensors)


def plan_isv(stop: float, target: float, horizon: int, threshold: float = 0.0,
             device: torch.device | str = "cpu") -> tuple[torch.Tensor, IsvLayout]:
    """An ISV of the trade plans' two slots alone, and its layout: ``VectorEnv(..., isv=, layout=)`` or
    :func:`foxhunt.env.backtest` with them steps with plans outside a run (a run's ISV has them when the
    trade_plans plugin is on). Arguments as ``[plugins.trade_plans]``'s keys."""
    layout = IsvLayout.compose([
        Slot(contract.PLAN_PARAMS, tables.PLAN_PARAM.size(), "trade_plans"),
        Slot(contract.PLAN_THRESHOLD, 1, "trade_plans", init=float(threshold)),
    ])
    isv = ISV(layout, device)
    values = [0.0] * tables.PLAN_PARAM.size()
    values[tables.PLAN_PARAM.STOP] = float(stop)
    values[tables.PLAN_PARAM.TARGET] = float(target)
    values[tables.PLAN_PARAM.HORIZON] = float(horizon)
    isv.tensor[layout.span(contract.PLAN_PARAMS)] = torch.tensor(values, dtype=isv.tensor.dtype, device=isv.tensor.device)
    return isv.tensor, layout
