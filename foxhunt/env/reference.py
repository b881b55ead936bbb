"""A plain-Python, float64, one-environment transcription of the physics: the tests' oracle.

It is written from ``docs/fill-model.md`` with ordinary objects and Python
floats, independently of the kernel source, so a vectorised environment of any
size must agree with one :class:`ReferenceEnv` per environment (same stream key,
same actions). It is slow and meant to be: clarity over speed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.env.config import EnvConfig
from foxhunt.env.tables import OHLCV, PLAN, PS, PortfolioObs
from foxhunt.kernels.rng import hash3

__all__ = ["ReferenceEnv", "Portfolio", "Plan", "PlanRules"]

_EPSILON = 1e-6  # whole-contract rounding tolerance (docs/fill-model.md)
_SHARE = {Magnitude.QUARTER: 0.25, Magnitude.HALF: 0.5, Magnitude.FULL: 1.0}


@attrs.define
class Portfolio:
    """One environment's portfolio; field names match :class:`PS` in lower case."""

    position: float = 0.0
    cash: float = 0.0
    equity: float = 0.0
    entry_price: float = 0.0
    peak_equity: float = 0.0
    drawdown: float = 0.0
    trades: float = 0.0
    wins: float = 0.0
    losses: float = 0.0
    win_sum: float = 0.0
    loss_sum: float = 0.0
    costs_paid: float = 0.0
    trade_pnl: float = 0.0
    bar: float = 0.0
    start_bar: float = 0.0
    opened_bar: float = 0.0
    last_fill_bar: float = 0.0
    last_fill_side: float = 0.0
    cap: float = 0.0
    kelly_fraction: float = 0.0
    turnover: float = 0.0
    fill_qty: float = 0.0
    fill_price: float = 0.0
    step_cost: float = 0.0
    step_execution: float = 0.0

    def as_row(self) -> np.ndarray:
        """The portfolio as a ``[PS]`` float64 row."""
        return np.array([getattr(self, field.name.lower()) for field in PS], dtype=np.float64)


@attrs.define
class Plan:
    """One environment's trade plan (docs/fill-model.md, "Trade plans"); field names match :class:`PLAN`."""

    side: float = 0.0
    entry: float = 0.0
    stop: float = 0.0
    target: float = 0.0
    expiry: float = 0.0
    conviction: float = 0.0
    stops: float = 0.0
    targets: float = 0.0
    expiries: float = 0.0

    def as_row(self) -> np.ndarray:
        """The plan as a ``[PLAN]`` float64 row."""
        return np.array([getattr(self, field.name.lower()) for field in PLAN], dtype=np.float64)


@attrs.frozen
class PlanRules:
    """Trade-plan parameters: distances as fractions of the entry price, horizon in bars, conviction threshold
    (0 turns the first three off, one by one)."""

    stop: float = 0.0
    target: float = 0.0
    horizon: float = 0.0
    threshold: float = 0.0


class ReferenceEnv:
    """One episode at a time over ``prices`` ``[bars, OHLC(V)]`` with the stream ``key`` for start draws."""

    def __init__(
        self,
        prices: np.ndarray,
        features: np.ndarray,
        instrument: InstrumentSpec,
        config: EnvConfig,
        *,
        window: tuple[int, int] | None = None,
        key: int = 0,
        health: float = 1.0,
        random_start: bool = True,
        auto_reset: bool = True,
        execution_part: bool = False,
        plans: PlanRules | None = None,
    ) -> None:
        self.prices = np.asarray(prices, dtype=np.float64)
        self.features = np.asarray(features, dtype=np.float32)
        self.instrument = instrument
        self.config = config
        self.window = (0, len(self.prices)) if window is None else window
        self.key = int(key)
        self.counter = 0
        self.health = health
        self.random_start = random_start
        self.auto_reset = auto_reset
        self.execution_part = execution_part  # write step_execution, as the kernel does with EP.EXECUTION_PART
        self.commission = instrument.commission if config.commission is None else config.commission
        self.reward_scale = config.resolved_reward_scale
        self.portfolio = Portfolio()
        self.plans = plans  # trade plans' rules, or None: no plans (the plan stays all 0)
        self.plan = Plan()
        self.finished = False

    def _price(self, bar: int, column: OHLCV) -> float:
        return float(self.prices[bar, column])

    def kelly_fraction(self) -> float:
        """Kelly share of max contracts from the round-trip statistics, blended over the warm-up."""
        p, c = self.portfolio, self.config
        observed = p.wins + p.losses
        unit = (p.win_sum + p.loss_sum) / observed if observed > 0 and p.win_sum + p.loss_sum > 0 else 1.0
        win_rate = (p.wins + c.kelly_prior_wins) / (observed + c.kelly_prior_wins + c.kelly_prior_losses)
        average_win = (p.win_sum + c.kelly_prior_wins * unit) / (p.wins + c.kelly_prior_wins)
        average_loss = (p.loss_sum + c.kelly_prior_losses * unit) / (p.losses + c.kelly_prior_losses)
        kelly = min(max(win_rate - (1.0 - win_rate) * average_loss / average_win, 0.0), 1.0)
        maturity = min(p.trades / c.kelly_warmup_trades, 1.0) if c.kelly_warmup_trades > 0 else 1.0
        return maturity * kelly + (1.0 - maturity)

    def cap(self) -> float:
        """Position cap for the next decision: min(max contracts, margin cap, Kelly cap)."""
        p, c = self.portfolio, self.config
        caps = [float(c.max_contracts)]
        if self.instrument.initial_margin > 0:
            caps.append(float(math.floor(max(p.equity, 0.0) * c.margin_fraction / self.instrument.initial_margin + _EPSILON)))
        safety = 0.5 + 0.5 * min(max(self.health, 0.0), 1.0)
        kelly = float(math.floor(c.max_contracts * safety * p.kelly_fraction + _EPSILON))
        caps.append(max(kelly, float(c.kelly_min_contracts)))
        return max(min(caps), 0.0)

    def observation(self) -> np.ndarray:
        p, c = self.portfolio, self.config
        bar = int(p.bar)
        portfolio = np.zeros(PortfolioObs.size())
        portfolio[PortfolioObs.POSITION] = p.position / c.max_contracts
        portfolio[PortfolioObs.CAP] = p.cap / c.max_contracts
        unrealised = p.position * (self._price(bar, OHLCV.CLOSE) - p.entry_price) * self.instrument.multiplier
        portfolio[PortfolioObs.UNREALISED_PNL] = unrealised / self.reward_scale
        portfolio[PortfolioObs.DRAWDOWN] = p.drawdown / p.peak_equity if p.peak_equity > 0 else 0.0
        portfolio[PortfolioObs.EPISODE_RETURN] = p.equity / c.initial_cash - 1.0
        portfolio[PortfolioObs.BARS_IN_POSITION] = (bar - p.opened_bar) / c.episode_bars if p.position != 0 else 0.0
        portfolio[PortfolioObs.EPISODE_PROGRESS] = (bar - p.start_bar) / c.episode_bars
        return np.concatenate([self.features[bar].astype(np.float64), portfolio])

    def reset(self) -> np.ndarray:
        first, end = self.window
        start = first
        if self.random_start:
            start = first + int(hash3(self.key, self.counter, 0)) % (end - 1 - first)
            self.counter += 1
        cash = float(self.config.initial_cash)
        self.portfolio = Portfolio(
            cash=cash, equity=cash, peak_equity=cash, bar=start, start_bar=start, opened_bar=start, last_fill_bar=start
        )
        self.portfolio.kelly_fraction = self.kelly_fraction()
        self.portfolio.cap = self.cap()
        self.plan = Plan()
        self.finished = False
        return self.observation()

    def _target(self, direction: int, magnitude: int) -> float:
        p = self.portfolio
        if direction == Direction.FLAT:
            target = 0.0
        elif direction in (Direction.LONG, Direction.SHORT):
            size = float(math.ceil(_SHARE.get(magnitude, 1.0) * p.cap - _EPSILON))
            target = size if direction == Direction.LONG else -size
        else:
            target = p.position
        return min(max(target, -p.cap), p.cap)

    def _execute(self, delta: float, order_type: int, urgency: int) -> tuple[float, float, float]:
        """(filled contracts, fill price, cost per contract) of an order for ``delta`` contracts."""
        p, c, spec = self.portfolio, self.config, self.instrument
        bar = int(p.bar)
        side = 1.0 if delta > 0 else -1.0
        urgency = urgency if urgency in (Urgency.PASSIVE, Urgency.AGGRESSIVE) else Urgency.NORMAL
        next_open = self._price(bar + 1, OHLCV.OPEN)
        if order_type == OrderType.LIMIT and abs(p.position) <= p.cap:
            limit = self._price(bar, OHLCV.CLOSE) - side * c.limit_offset_ticks[urgency] * spec.tick_size
            if side > 0 and self._price(bar + 1, OHLCV.LOW) < limit:
                return delta, min(next_open, limit), self.commission
            if side < 0 and self._price(bar + 1, OHLCV.HIGH) > limit:
                return delta, max(next_open, limit), self.commission
            return 0.0, 0.0, self.commission
        half_spread = 0.5 * spec.spread_ticks * spec.tick_size
        slippage = c.slippage_ticks * spec.tick_size * c.slippage_by_urgency[urgency]
        return delta, next_open, (half_spread + slippage) * spec.multiplier + self.commission

    def _book(self, qty: float, effective_price: float, bar: int) -> None:
        p = self.portfolio
        if p.position == 0 or (p.position > 0) == (qty > 0):
            if p.position == 0:
                p.opened_bar, p.trade_pnl = bar, 0.0
            held = abs(p.position)
            p.entry_price = (held * p.entry_price + abs(qty) * effective_price) / (held + abs(qty))
            return
        long = 1.0 if p.position > 0 else -1.0
        closed = min(abs(qty), abs(p.position))
        p.trade_pnl += closed * (effective_price - p.entry_price) * long * self.instrument.multiplier
        if abs(qty) < abs(p.position):
            return
        p.trades += 1
        if p.trade_pnl > 0:
            p.wins += 1
            p.win_sum += p.trade_pnl
        else:
            p.losses += 1
            p.loss_sum -= p.trade_pnl
        p.kelly_fraction = self.kelly_fraction()
        p.trade_pnl = 0.0
        if abs(qty) > abs(p.position):
            p.entry_price, p.opened_bar = effective_price, bar
        else:
            p.entry_price = 0.0

    def step(self, action: Sequence[int]) -> tuple[np.ndarray, float, bool]:
        """Apply one action (``[Branch]``); returns (observation, reward, done)."""
        if self.finished and not self.auto_reset:
            self.portfolio.step_execution = 0.0
            return self.observation(), 0.0, True
        p, c = self.portfolio, self.config
        multiplier = self.instrument.multiplier
        bar = int(p.bar)
        position = p.position
        delta = self._target(int(action[Branch.DIRECTION]), int(action[Branch.MAGNITUDE])) - p.position
        qty, price, per_contract = 0.0, 0.0, 0.0
        exit_kind = None
        if self.plans is not None and self.plan.side != 0 and delta == 0:  # holding: the plan's exits work
            exit_kind, exit_price = self._plan_exit(bar)
        if exit_kind is not None:
            delta = qty = -p.position
            price = exit_price
            spec = self.instrument
            per_contract = self.commission
            if exit_kind != "targets":  # the stop and the horizon close at the market, NORMAL urgency
                adverse = 0.5 * spec.spread_ticks * spec.tick_size \
                    + c.slippage_ticks * spec.tick_size * c.slippage_by_urgency[Urgency.NORMAL]
                per_contract += adverse * multiplier
        elif delta != 0:
            qty, price, per_contract = self._execute(delta, int(action[Branch.ORDER_TYPE]), int(action[Branch.URGENCY]))
            if qty == 0:
                per_contract = 0.0
        close0, close1 = self._price(bar, OHLCV.CLOSE), self._price(bar + 1, OHLCV.CLOSE)
        cost = abs(qty) * per_contract
        gross = (p.position * (close1 - close0) + qty * (close1 - price)) * multiplier
        churn = 0.0
        if qty != 0:
            side = 1.0 if qty > 0 else -1.0
            self._book(qty, price + side * per_contract / multiplier, bar + 1)
            if p.last_fill_side == -side:
                fade = max(c.churn_bars - (bar + 1 - p.last_fill_bar) + 1.0, 0.0) / c.churn_bars
                churn = c.w_churn * abs(qty) * fade
            p.last_fill_bar, p.last_fill_side = bar + 1, side
        p.position += qty
        equity = p.equity + gross - cost
        peak = max(p.peak_equity, equity)
        deepening = max((peak - equity) - p.drawdown, 0.0)
        p.cash -= qty * price * multiplier
        p.equity, p.peak_equity, p.drawdown = equity, peak, peak - equity
        p.costs_paid += cost
        p.turnover += abs(qty) * price * multiplier
        p.fill_qty, p.fill_price, p.step_cost = qty, price, cost
        p.bar = bar + 1
        penalty = c.w_holding * abs(p.position) + churn + c.w_drawdown * deepening
        reward = (c.w_pnl * gross - c.w_cost * cost - penalty) / self.reward_scale
        if self.execution_part:  # as the kernel under EP.EXECUTION_PART; off, the field keeps its reset 0
            # what the same contracts would have made as a PASSIVE market order; the difference is the execution's
            spec = self.instrument
            passive = (0.5 * spec.spread_ticks * spec.tick_size
                       + c.slippage_ticks * spec.tick_size * c.slippage_by_urgency[Urgency.PASSIVE]) * multiplier
            reference_cost = abs(delta) * (passive + self.commission)
            reference_gross = (p.position - qty) * (close1 - close0) * multiplier \
                + delta * (close1 - self._price(bar + 1, OHLCV.OPEN)) * multiplier
            p.step_execution = (c.w_pnl * (gross - reference_gross)
                                - c.w_cost * (cost - reference_cost)) / self.reward_scale
        execution = p.step_execution
        done = p.bar - p.start_bar >= c.episode_bars or bar + 2 >= self.window[1] or equity <= 0
        p.cap = self.cap()
        self.finished = done
        if self.plans is not None:
            self._update_plan(done, exit_kind, position, qty, price, bar, int(action[Branch.MAGNITUDE]))
        if done and self.auto_reset:
            observation = self.reset()
            self.portfolio.step_execution = execution  # the kernel keeps it across the auto-reset, as the reward
            return observation, reward, True
        return self.observation(), reward, done

    # -- trade plans (docs/fill-model.md, "Trade plans") ------------------------------------------------------
    def _plan_exit(self, bar: int) -> tuple[str | None, float]:
        """The open plan's exit on bar ``bar + 1`` (``"expiries"``, ``"stops"``, ``"targets"`` or None) and its price."""
        rules, plan = self.plans, self.plan
        next_open = self._price(bar + 1, OHLCV.OPEN)
        high, low = self._price(bar + 1, OHLCV.HIGH), self._price(bar + 1, OHLCV.LOW)
        if rules.horizon > 0 and bar >= plan.expiry:
            return "expiries", next_open
        if rules.stop > 0:
            if plan.side > 0 and low <= plan.stop:
                return "stops", min(next_open, plan.stop)
            if plan.side < 0 and high >= plan.stop:
                return "stops", max(next_open, plan.stop)
        if rules.target > 0:
            if plan.side > 0 and high > plan.target:
                return "targets", max(next_open, plan.target)
            if plan.side < 0 and low < plan.target:
                return "targets", min(next_open, plan.target)
        return None, next_open

    def _update_plan(self, done: bool, exit_kind: str | None, position: float, qty: float, price: float, bar: int,
                     magnitude: int) -> None:
        """After a step: count an exit, close the plan, or open one with a new position."""
        counts = (self.plan.stops, self.plan.targets, self.plan.expiries)
        new_position = position + qty
        opened = new_position != 0 and (position == 0 or (position > 0) != (new_position > 0))
        if exit_kind is not None:
            setattr(self.plan, exit_kind, getattr(self.plan, exit_kind) + 1.0)
            counts = (self.plan.stops, self.plan.targets, self.plan.expiries)
        if done or exit_kind is not None or new_position == 0 or opened:
            self.plan = Plan(stops=counts[0], targets=counts[1], expiries=counts[2])
        conviction = _SHARE.get(magnitude, 1.0)
        if not done and exit_kind is None and opened and conviction >= self.plans.threshold:
            side = 1.0 if new_position > 0 else -1.0
            rules = self.plans
            self.plan.side, self.plan.entry, self.plan.conviction = side, price, conviction
            self.plan.stop = price - side * rules.stop * price
            self.plan.target = price + side * rules.target * price
            self.plan.expiry = bar + 1 + rules.horizon
