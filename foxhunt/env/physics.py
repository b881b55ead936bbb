"""The futures environment's physics, written once as device functions.

Everything here is a :func:`foxhunt.kernels.device_function`: it compiles into
the parallel CPU kernel and the CUDA kernel and runs as plain Python under the
CUDA simulator. ``env_step_row`` advances environment ``i`` by one bar and
``env_reset_row`` starts a new episode for it. The fill model, costs, caps and
reward are documented in ``docs/fill-model.md``; ``foxhunt.env.reference`` is an
independent float64 transcription used as the test oracle.

The kernel arguments are one tuple (``ENV_SIGNALS`` order in
``foxhunt.env.kernel``)::

    prices   [bars, OHLCV]          float (state dtype)
    features [bars, features]       float32
    state    [envs, PS]             float
    rng      [envs, RNG]            int64
    actions  [envs, Branch]         int
    params   [EP]                   float
    health   [1]                    float32, learning health in [0, 1]
    obs      [envs, features + PortfolioObs]  float32
    reward   [envs]                 float
    done     [envs]                 bool
"""

from __future__ import annotations

import math

import numpy as np

from foxhunt import actions
from foxhunt.data import market
from foxhunt.env import tables
from foxhunt.kernels.dual import device_constants, device_function
from foxhunt.kernels.rng import hash3

# Kernel-side views of the tables (plain-int namedtuples: numba.cuda cannot index with IntEnum members).
Branch = device_constants(actions.Branch)
Direction = device_constants(actions.Direction)
Magnitude = device_constants(actions.Magnitude)
OrderType = device_constants(actions.OrderType)
Urgency = device_constants(actions.Urgency)
OHLCV = device_constants(market.OHLCV)
PS = device_constants(tables.PS)
EP = device_constants(tables.EP)
RNG = device_constants(tables.RNG)
PortfolioObs = device_constants(tables.PortfolioObs)

__all__ = [
    "smaller",
    "larger",
    "urgency_slippage",
    "limit_offset_ticks",
    "kelly_fraction",
    "position_cap",
    "target_position",
    "write_observation",
    "reset_env",
    "book_fill",
    "agent_order",
    "settle",
    "env_step_row",
    "env_reset_row",
    "START_LANE",
    "CONTRACT_EPSILON",
]

START_LANE = 0  # lane of the counter-based stream that draws episode start bars
# Caps are whole contracts: a size that is an integer up to rounding (7.9999999
# from 8 * 0.5 * 1.9999999) counts as that integer, so float32, float64 and
# fused multiply-adds on the GPU agree on the cap.
CONTRACT_EPSILON = np.float32(1e-6)
# Every constant the step computes with is a float32 scalar, and bar arithmetic stays on the float state
# fields: numba types a Python float (or an int mixed with a float) as float64, which promoted the whole
# float32 step to float64 arithmetic. On CUDA that doubled the registers of every live value (82 per thread
# against 56) and cost 13 % of env steps/s at a million environments (docs/kernels.md, "Float32 arithmetic");
# tests/env/test_physics.py::test_a_float32_environment_computes_in_float32 keeps it so. A float64 state still computes in float64.
ZERO = np.float32(0.0)
ONE = np.float32(1.0)
HALF = np.float32(0.5)
QUARTER = np.float32(0.25)


@device_function
def smaller(a, b):
    """min(a, b) for mixed float32/float64 operands (numba.cuda's builtin min needs one type)."""
    return a if a < b else b


@device_function
def larger(a, b):
    """max(a, b) for mixed float32/float64 operands."""
    return a if a > b else b


@device_function
def urgency_slippage(params, urgency):
    """Slippage multiplier of a market order at ``urgency``."""
    if urgency == Urgency.PASSIVE:
        return params[EP.SLIP_PASSIVE]
    if urgency == Urgency.AGGRESSIVE:
        return params[EP.SLIP_AGGRESSIVE]
    return params[EP.SLIP_NORMAL]


@device_function
def limit_offset_ticks(params, urgency):
    """Ticks a limit order is placed away from the decision bar's close, at ``urgency``."""
    if urgency == Urgency.PASSIVE:
        return params[EP.LIMIT_PASSIVE]
    if urgency == Urgency.AGGRESSIVE:
        return params[EP.LIMIT_AGGRESSIVE]
    return params[EP.LIMIT_NORMAL]


@device_function
def kelly_fraction(state, i, params):
    """Share of MAX_CONTRACTS the Kelly criterion allows, blended in over the maturity warm-up.

    Depends only on the round-trip statistics, so the step recomputes it only
    when a round trip completes (and reset when an episode starts).
    """
    wins = state[i, PS.WINS]
    losses = state[i, PS.LOSSES]
    prior_wins = params[EP.KELLY_PRIOR_WINS]
    prior_losses = params[EP.KELLY_PRIOR_LOSSES]
    # Prior trades are sized like the average observed trade (1 before any), so
    # the prior payoff ratio is 1 and the prior win rate is 1/2 with equal priors.
    unit = ONE
    total = state[i, PS.WIN_SUM] + state[i, PS.LOSS_SUM]
    if wins + losses > 0.0 and total > 0.0:
        unit = total / (wins + losses)
    win_rate = (wins + prior_wins) / (wins + losses + prior_wins + prior_losses)
    average_win = (state[i, PS.WIN_SUM] + prior_wins * unit) / (wins + prior_wins)
    average_loss = (state[i, PS.LOSS_SUM] + prior_losses * unit) / (losses + prior_losses)
    kelly = win_rate - (ONE - win_rate) * average_loss / average_win
    kelly = smaller(larger(kelly, ZERO), ONE)
    # Maturity warm-up: with few trades the statistics mean little, so the cap
    # starts at the full size and moves to the Kelly fraction trade by trade.
    maturity = ONE
    warmup = params[EP.KELLY_WARMUP_TRADES]
    if warmup > 0.0:
        maturity = smaller(state[i, PS.TRADES] / warmup, ONE)
    return maturity * kelly + (ONE - maturity)


@device_function
def position_cap(state, i, params, health):
    """Contracts environment ``i`` may hold: min(max contracts, margin cap, Kelly cap)."""
    max_contracts = params[EP.MAX_CONTRACTS]
    cap = max_contracts
    margin = params[EP.INITIAL_MARGIN]
    if margin > 0.0:
        equity = larger(state[i, PS.EQUITY], ZERO)
        cap = smaller(cap, np.float32(math.floor(equity * params[EP.MARGIN_FRACTION] / margin + CONTRACT_EPSILON)))
    safety = HALF + HALF * smaller(larger(health[0], ZERO), ONE)
    kelly_size = max_contracts * safety * state[i, PS.KELLY_FRACTION]
    kelly_cap = larger(np.float32(math.floor(kelly_size + CONTRACT_EPSILON)), params[EP.KELLY_MIN_CONTRACTS])
    return larger(smaller(cap, kelly_cap), ZERO)


@device_function
def target_position(direction, magnitude, position, cap):
    """Signed target in contracts: HOLD keeps ``position``, FLAT is 0, SHORT/LONG a share of ``cap``.

    Any target is clipped to [-cap, cap], so HOLD over a cap that shrank cuts
    the excess. Unknown direction codes act as HOLD, unknown magnitudes as FULL.
    """
    target = position
    if direction == Direction.FLAT:
        target = ZERO
    elif direction == Direction.LONG or direction == Direction.SHORT:
        share = ONE
        if magnitude == Magnitude.QUARTER:
            share = QUARTER
        elif magnitude == Magnitude.HALF:
            share = HALF
        # Rounding up keeps QUARTER of a small cap at one contract rather than none.
        size = np.float32(math.ceil(share * cap - CONTRACT_EPSILON))
        target = size if direction == Direction.LONG else -size
    return smaller(larger(target, -cap), cap)


@device_function
def write_observation(i, prices, features, state, params, obs):
    """Market features of the current bar followed by the portfolio features (PortfolioObs)."""
    # Every read comes before the first write to obs, and the features are copied four loads ahead of their
    # stores: the compiler cannot move a load above a store to an array that may alias it, so one load per
    # store would wait out its latency alone. 8 % more env steps/s at a million environments on an H200
    # (docs/kernels.md, "Loads before stores").
    bar_float = state[i, PS.BAR]
    bar = int(bar_float)
    position = state[i, PS.POSITION]
    entry_price = state[i, PS.ENTRY_PRICE]
    opened_bar = state[i, PS.OPENED_BAR]
    peak = state[i, PS.PEAK_EQUITY]
    drawdown_money = state[i, PS.DRAWDOWN]
    cap = state[i, PS.CAP]
    equity = state[i, PS.EQUITY]
    start_bar = state[i, PS.START_BAR]
    close = prices[bar, OHLCV.CLOSE]
    n_features = features.shape[1]
    f = 0
    while f + 4 <= n_features:
        a = features[bar, f]
        b = features[bar, f + 1]
        c = features[bar, f + 2]
        d = features[bar, f + 3]
        obs[i, f] = a
        obs[i, f + 1] = b
        obs[i, f + 2] = c
        obs[i, f + 3] = d
        f += 4
    while f < n_features:
        obs[i, f] = features[bar, f]
        f += 1
    per_contract = params[EP.INV_MAX_CONTRACTS]
    per_bar = params[EP.INV_EPISODE_BARS]
    unrealised = position * (close - entry_price) * params[EP.MULTIPLIER]
    held = ZERO
    if position != 0.0:
        held = (bar_float - opened_bar) * per_bar
    drawdown = ZERO
    if peak > 0.0:
        drawdown = drawdown_money / peak
    obs[i, n_features + PortfolioObs.POSITION] = position * per_contract
    obs[i, n_features + PortfolioObs.CAP] = cap * per_contract
    obs[i, n_features + PortfolioObs.UNREALISED_PNL] = unrealised / params[EP.REWARD_SCALE]
    obs[i, n_features + PortfolioObs.DRAWDOWN] = drawdown
    obs[i, n_features + PortfolioObs.EPISODE_RETURN] = equity / params[EP.INITIAL_CASH] - ONE
    obs[i, n_features + PortfolioObs.BARS_IN_POSITION] = held
    obs[i, n_features + PortfolioObs.EPISODE_PROGRESS] = (bar_float - start_bar) * per_bar


@device_function
def reset_env(i, prices, features, state, rng, params, health, obs):
    """Start a new episode for environment ``i`` and write its first observation."""
    start = int(params[EP.WINDOW_START])
    if params[EP.RANDOM_START] > 0.5:
        # Valid starts are WINDOW_START .. WINDOW_END - 2: a start needs a next bar to fill on.
        span = int(params[EP.WINDOW_END]) - 1 - start
        counter = rng[i, RNG.COUNTER]
        word = hash3(rng[i, RNG.KEY], counter, START_LANE)
        rng[i, RNG.COUNTER] = counter + 1
        start = start + word % span
    cash = params[EP.INITIAL_CASH]
    state[i, PS.POSITION] = ZERO
    state[i, PS.CASH] = cash
    state[i, PS.EQUITY] = cash
    state[i, PS.ENTRY_PRICE] = ZERO
    state[i, PS.PEAK_EQUITY] = cash
    state[i, PS.DRAWDOWN] = ZERO
    state[i, PS.TRADES] = ZERO
    state[i, PS.WINS] = ZERO
    state[i, PS.LOSSES] = ZERO
    state[i, PS.WIN_SUM] = ZERO
    state[i, PS.LOSS_SUM] = ZERO
    state[i, PS.COSTS_PAID] = ZERO
    state[i, PS.TRADE_PNL] = ZERO
    state[i, PS.BAR] = start
    state[i, PS.START_BAR] = start
    state[i, PS.OPENED_BAR] = start
    state[i, PS.LAST_FILL_BAR] = start
    state[i, PS.LAST_FILL_SIDE] = ZERO
    state[i, PS.TURNOVER] = ZERO
    state[i, PS.FILL_QTY] = ZERO
    state[i, PS.FILL_PRICE] = ZERO
    state[i, PS.STEP_COST] = ZERO
    state[i, PS.KELLY_FRACTION] = kelly_fraction(state, i, params)
    state[i, PS.CAP] = position_cap(state, i, params, health)
    write_observation(i, prices, features, state, params, obs)


@device_function
def book_fill(state, i, params, position, qty, effective_price, bar, multiplier):
    """Round-trip bookkeeping of a fill: entry price, realised P&L, win/loss statistics."""
    if position == 0.0 or (position > 0.0) == (qty > 0.0):
        held = abs(position)
        if held == 0.0:
            state[i, PS.OPENED_BAR] = bar
            state[i, PS.TRADE_PNL] = ZERO
        state[i, PS.ENTRY_PRICE] = (held * state[i, PS.ENTRY_PRICE] + abs(qty) * effective_price) / (held + abs(qty))
        return
    direction = ONE if position > 0.0 else -ONE
    closed = smaller(abs(qty), abs(position))
    trade_pnl = state[i, PS.TRADE_PNL] + closed * (effective_price - state[i, PS.ENTRY_PRICE]) * direction * multiplier
    if abs(qty) < abs(position):
        state[i, PS.TRADE_PNL] = trade_pnl
        return
    state[i, PS.TRADES] += ONE
    if trade_pnl > 0.0:
        state[i, PS.WINS] += ONE
        state[i, PS.WIN_SUM] += trade_pnl
    else:
        state[i, PS.LOSSES] += ONE
        state[i, PS.LOSS_SUM] -= trade_pnl
    state[i, PS.KELLY_FRACTION] = kelly_fraction(state, i, params)
    state[i, PS.TRADE_PNL] = ZERO
    if abs(qty) > abs(position):
        state[i, PS.ENTRY_PRICE] = effective_price
        state[i, PS.OPENED_BAR] = bar
    else:
        state[i, PS.ENTRY_PRICE] = ZERO


@device_function
def agent_order(prices, i, actions, params, bar, position, cap, delta, close0, open1, multiplier):
    """The fill on the next bar of the order for ``delta`` contracts that environment ``i``'s action places at
    bar ``bar``'s close (its order type and urgency; ``delta``: the action's target minus ``position``).

    Returns ``(side, qty, fill_price, per_contract)``: the order's side (+1 buys, -1 sells), the contracts
    filled (``delta``, or 0 for a limit order the bar did not reach), the reference fill price and the cost
    per contract (docs/fill-model.md).
    """
    qty = ZERO
    fill_price = ZERO
    per_contract = ZERO
    side = ONE if delta > 0.0 else -ONE
    if delta != 0.0:
        urgency = actions[i, Branch.URGENCY]
        # A position over its cap (equity fell) is cut at the market, whatever the order type.
        forced = abs(position) > cap
        if actions[i, Branch.ORDER_TYPE] == OrderType.LIMIT and not forced:
            limit = close0 - side * limit_offset_ticks(params, urgency) * params[EP.TICK]
            per_contract = params[EP.COMMISSION]
            if side > 0.0:
                if prices[bar + 1, OHLCV.LOW] < limit:
                    qty = delta
                    fill_price = smaller(open1, limit)
            elif prices[bar + 1, OHLCV.HIGH] > limit:
                qty = delta
                fill_price = larger(open1, limit)
        else:
            qty = delta
            fill_price = open1
            adverse = params[EP.HALF_SPREAD] + params[EP.SLIPPAGE] * urgency_slippage(params, urgency)
            per_contract = adverse * multiplier + params[EP.COMMISSION]
    return side, qty, fill_price, per_contract


@device_function
def settle(i, prices, features, state, rng, params, health, obs, reward, done,
           bar_float, position, delta, side, qty, fill_price, per_contract, close0, open1, close1, multiplier):
    """Book a step's fill (``qty`` contracts at ``fill_price``, ``per_contract`` costs) and mark at the close.

    Writes the portfolio row, the reward and the done flag, then the next observation (or, at an episode's
    end with auto-reset, the next episode's first one). ``delta`` is the order's size: the reward's
    execution part compares the fill with a PASSIVE market order for it.
    """
    next_bar = bar_float + ONE
    cost = abs(qty) * per_contract
    gross = (position * (close1 - close0) + qty * (close1 - fill_price)) * multiplier
    churn = ZERO
    if qty != 0.0:
        book_fill(state, i, params, position, qty, fill_price + side * per_contract / multiplier, next_bar, multiplier)
        if state[i, PS.LAST_FILL_SIDE] == -side:
            bars_since = next_bar - state[i, PS.LAST_FILL_BAR]
            fade = larger(params[EP.CHURN_BARS] - bars_since + ONE, ZERO) / params[EP.CHURN_BARS]
            churn = params[EP.W_CHURN] * abs(qty) * fade
        state[i, PS.LAST_FILL_BAR] = next_bar
        state[i, PS.LAST_FILL_SIDE] = side

    new_position = position + qty
    equity = state[i, PS.EQUITY] + gross - cost
    peak = larger(state[i, PS.PEAK_EQUITY], equity)
    drawdown = peak - equity
    deepening = larger(drawdown - state[i, PS.DRAWDOWN], ZERO)
    state[i, PS.POSITION] = new_position
    state[i, PS.CASH] -= qty * fill_price * multiplier
    state[i, PS.EQUITY] = equity
    state[i, PS.PEAK_EQUITY] = peak
    state[i, PS.DRAWDOWN] = drawdown
    state[i, PS.COSTS_PAID] += cost
    state[i, PS.TURNOVER] += abs(qty) * fill_price * multiplier
    state[i, PS.FILL_QTY] = qty
    state[i, PS.FILL_PRICE] = fill_price
    state[i, PS.STEP_COST] = cost
    state[i, PS.BAR] = next_bar

    penalty = params[EP.W_HOLDING] * abs(new_position) + churn + params[EP.W_DRAWDOWN] * deepening
    reward[i] = (params[EP.W_PNL] * gross - params[EP.W_COST] * cost - penalty) / params[EP.REWARD_SCALE]
    if params[EP.EXECUTION_PART] > 0.5:  # the same for every thread; off, the step skips the ~9 % it costs on CUDA
        # The reference execution: all ``delta`` contracts at the next open, paying a PASSIVE market order's costs.
        # The position (direction and magnitude) earns the reward that order would have; the rest is the execution's.
        reference_cost = abs(delta) * (
            (params[EP.HALF_SPREAD] + params[EP.SLIPPAGE] * params[EP.SLIP_PASSIVE]) * multiplier
            + params[EP.COMMISSION]
        )
        reference_gross = (position * (close1 - close0) + delta * (close1 - open1)) * multiplier
        state[i, PS.STEP_EXECUTION] = (
            params[EP.W_PNL] * (gross - reference_gross) - params[EP.W_COST] * (cost - reference_cost)
        ) / params[EP.REWARD_SCALE]
    finished = (
        next_bar - state[i, PS.START_BAR] >= params[EP.EPISODE_BARS]
        or next_bar + ONE >= params[EP.WINDOW_END]
        or equity <= ZERO
    )
    done[i] = finished
    state[i, PS.CAP] = position_cap(state, i, params, health)
    if finished and params[EP.AUTO_RESET] > 0.5:
        reset_env(i, prices, features, state, rng, params, health, obs)
    else:
        write_observation(i, prices, features, state, params, obs)


@device_function
def env_step_row(i, args):
    """Advance environment ``i`` by one bar: decide at bar t's close, fill on bar t+1, mark at its close."""
    prices, features, state, rng, actions, params, health, obs, reward, done = args
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
    side, qty, fill_price, per_contract = agent_order(prices, i, actions, params, bar, position, cap, delta, close0,
                                                      open1, multiplier)
    settle(i, prices, features, state, rng, params, health, obs, reward, done,
           bar_float, position, delta, side, qty, fill_price, per_contract, close0, open1, close1, multiplier)


@device_function
def env_reset_row(i, args):
    """Start a new episode for environment ``i`` (the reset kernel)."""
    prices, features, state, rng, actions, params, health, obs, reward, done = args
    reset_env(i, prices, features, state, rng, params, health, obs)
    reward[i] = ZERO
    state[i, PS.STEP_EXECUTION] = ZERO
    done[i] = False
