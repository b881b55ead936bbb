"""Named dimensions of the environment's buffers (invariant 5).

``PS`` names a row of portfolio state (``state: [envs, PS]``), ``EP`` the
physics parameters (``params: [EP]``), ``RNG`` an environment's counter-based
random stream (``rng: [envs, RNG]``, int64) and ``PortfolioObs`` the portfolio
part of an observation, which follows the market features
(``obs: [envs, features + PortfolioObs]``). Prices use
:class:`foxhunt.data.market.OHLCV` columns (``OPEN``..``CLOSE``; a ``VOLUME``
column may follow and is ignored).

Money is in the instrument's currency, positions in signed contracts, bars are
indices into the price series (stored as floats so one buffer holds the row).
"""

from __future__ import annotations

from foxhunt.data.market import OHLCV
from foxhunt.dims import DimTable, auto

__all__ = ["OHLCV", "PS", "EP", "RNG", "PortfolioObs", "PORTFOLIO_MIRROR_PARITY", "PLAN", "PLAN_PARAM"]


class PS(DimTable):
    """Portfolio state of one environment (one row of ``state``)."""

    POSITION = auto()  # signed contracts held after the last fill
    CASH = auto()  # initial cash minus trade cash flows at reference prices (costs excluded)
    EQUITY = auto()  # marked at the current bar's close, net of every cost paid
    ENTRY_PRICE = auto()  # average effective entry price of the open position (costs included)
    PEAK_EQUITY = auto()  # highest equity this episode
    DRAWDOWN = auto()  # PEAK_EQUITY - EQUITY, in money
    TRADES = auto()  # completed round trips (position back to zero or reversed)
    WINS = auto()  # round trips with positive realised P&L
    LOSSES = auto()  # round trips with zero or negative realised P&L
    WIN_SUM = auto()  # total realised P&L of the wins
    LOSS_SUM = auto()  # total realised loss of the losses (a positive number)
    COSTS_PAID = auto()  # commission + spread + slippage paid this episode
    TRADE_PNL = auto()  # realised P&L of the round trip in progress
    BAR = auto()  # current bar: the agent has seen this bar's close
    START_BAR = auto()  # bar the episode started at
    OPENED_BAR = auto()  # bar the open position was opened at
    LAST_FILL_BAR = auto()  # bar of the last fill
    LAST_FILL_SIDE = auto()  # +1 bought, -1 sold, 0 no fill yet this episode
    CAP = auto()  # position cap (contracts) for the next decision: min(max, margin, Kelly)
    KELLY_FRACTION = auto()  # Kelly fraction blended by maturity; changes only when a round trip completes
    TURNOVER = auto()  # notional traded this episode, in money
    FILL_QTY = auto()  # signed contracts filled by the last step (0: none)
    FILL_PRICE = auto()  # price the last step's fill traded at (reference price, before costs)
    STEP_COST = auto()  # costs paid by the last step
    # the execution's part of the last step's reward (reward units): what the fill and its costs gained or lost
    # against a PASSIVE market order for the same contracts (docs/fill-model.md, "The reward's execution part").
    # Like the reward it survives the auto-reset that ends an episode; an explicit reset zeroes it.
    STEP_EXECUTION = auto()


class EP(DimTable):
    """Physics parameters, one value each (``params: [EP]``), written from EnvConfig and InstrumentSpec."""

    MULTIPLIER = auto()  # money per contract per price unit
    TICK = auto()  # tick size, price units
    HALF_SPREAD = auto()  # half the quoted spread, price units
    COMMISSION = auto()  # money per contract per side
    SLIPPAGE = auto()  # market-order slippage at NORMAL urgency, price units
    SLIP_PASSIVE = auto()  # slippage multiplier per urgency (market orders)
    SLIP_NORMAL = auto()
    SLIP_AGGRESSIVE = auto()
    LIMIT_PASSIVE = auto()  # limit-price improvement in ticks per urgency (limit orders)
    LIMIT_NORMAL = auto()
    LIMIT_AGGRESSIVE = auto()
    INITIAL_CASH = auto()
    MAX_CONTRACTS = auto()
    INV_MAX_CONTRACTS = auto()  # reciprocals: the observation multiplies instead of dividing
    INV_EPISODE_BARS = auto()
    INITIAL_MARGIN = auto()  # money per contract
    MARGIN_FRACTION = auto()  # share of equity that may be posted as initial margin
    KELLY_PRIOR_WINS = auto()
    KELLY_PRIOR_LOSSES = auto()
    KELLY_WARMUP_TRADES = auto()  # trades over which the cap blends from MAX_CONTRACTS to Kelly
    KELLY_MIN_CONTRACTS = auto()  # the Kelly cap never goes below this
    W_PNL = auto()  # reward weights
    W_COST = auto()
    W_HOLDING = auto()  # money per contract held per bar
    W_CHURN = auto()  # money per contract reversed immediately after the last fill
    CHURN_BARS = auto()  # bars over which the churn penalty decays to zero
    W_DRAWDOWN = auto()  # per unit of money the drawdown deepens
    REWARD_SCALE = auto()  # money per unit of reward
    EPISODE_BARS = auto()
    WINDOW_START = auto()  # first bar an episode may start at
    WINDOW_END = auto()  # one past the last bar an episode may use
    RANDOM_START = auto()  # 1: start at a random bar of the window; 0: at WINDOW_START
    AUTO_RESET = auto()  # 1: a finished episode restarts in the same step; 0: it stays finished
    EXECUTION_PART = auto()  # 1: the step writes PS.STEP_EXECUTION (a run that splits rewards); 0: it stays 0


class PLAN(DimTable):
    """A trade plan of one environment (one row of ``plan: [envs, PLAN]``; docs/fill-model.md, "Trade plans").

    A plan is the intent the agent's entry carries across bars: where it gives up (stop), where it takes the
    profit (target) and how long it waits (the expiry bar). All zero when no plan is open.
    """

    SIDE = auto()  # +1 a long's plan, -1 a short's, 0 no plan open
    ENTRY = auto()  # reference price of the fill that opened the position (before costs)
    STOP = auto()  # stop price: a long is sold when a bar's low reaches it, a short bought when a high does
    TARGET = auto()  # target price: a long is sold when a bar's high trades above it, a short bought below
    EXPIRY = auto()  # bar at whose close the plan's horizon ends: the position is closed at the next open
    CONVICTION = auto()  # share of the cap the entry asked for (0.25, 0.5 or 1): the magnitude the agent chose
    STOPS = auto()  # this episode's exits by kind: stops, targets, expiries
    TARGETS = auto()
    EXPIRIES = auto()


class PLAN_PARAM(DimTable):  # noqa: N801 - the table's name is the one docs and the issue use
    """Trade-plan parameters, one value each: the columns of the ``trade_plans.params`` ISV slot."""

    STOP = auto()  # stop distance as a fraction of the entry price (0.01: 1 % below a long's entry); 0: no stop
    TARGET = auto()  # target distance as a fraction of the entry price; 0: no target
    HORIZON = auto()  # bars a position may be held before the plan closes it; 0: no horizon


class RNG(DimTable):
    """An environment's counter-based random stream (``rng: [envs, RNG]``, int64)."""

    KEY = auto()  # fixed per environment, derived from the seed
    COUNTER = auto()  # advanced by the kernel at every draw


class PortfolioObs(DimTable):
    """Portfolio features appended to the market features of an observation."""

    POSITION = auto()  # position / MAX_CONTRACTS
    CAP = auto()  # position cap / MAX_CONTRACTS
    UNREALISED_PNL = auto()  # open position's P&L at the close, / REWARD_SCALE
    DRAWDOWN = auto()  # drawdown / peak equity
    EPISODE_RETURN = auto()  # equity / initial cash - 1
    BARS_IN_POSITION = auto()  # bars since the position was opened / EPISODE_BARS (0 when flat)
    EPISODE_PROGRESS = auto()  # bars since the episode start / EPISODE_BARS


# How each portfolio input behaves in the mirrored market (every price move negated, long and short swapped):
# the position changes sign; the cap, the open position's P&L (both its sign and the move flip), the drawdown,
# the episode's return and the clocks are unchanged. Read by foxhunt/env/mirror.py.
PORTFOLIO_MIRROR_PARITY: dict[PortfolioObs, float] = {
    PortfolioObs.POSITION: -1.0,
    PortfolioObs.CAP: 1.0,
    PortfolioObs.UNREALISED_PNL: 1.0,
    PortfolioObs.DRAWDOWN: 1.0,
    PortfolioObs.EPISODE_RETURN: 1.0,
    PortfolioObs.BARS_IN_POSITION: 1.0,
    PortfolioObs.EPISODE_PROGRESS: 1.0,
}
