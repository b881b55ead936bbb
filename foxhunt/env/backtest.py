"""Greedy backtest of a policy over a whole window, as one sequential episode with the training physics.

The backtest builds a :class:`VectorEnv` of one environment that starts at the
window's first bar, never resets, and ends at the window's last bar, and steps
it with ``step_kernel``: a run passes its own environment kernel (the
``KernelPoint.ENV_STEP`` record of its plugins, :mod:`foxhunt.env.run_kernel`),
so every fill, cost and cap is computed by the same kernel as in training;
without one it is the core physics (:func:`foxhunt.env.kernel.run_env_step`).
It records the portfolio row after each bar on the device and reads it back once.

Metric definitions (``docs/fill-model.md`` has the physics):

- ``net_pnl``: final equity minus initial cash, in money.
- ``sharpe``: mean / sample standard deviation of per-bar equity returns,
  times ``sqrt(bars_per_year)`` (``InstrumentSpec.bars_per_year``); 0 when the
  returns do not vary.
- ``sortino``: mean per-bar return / downside deviation
  (``sqrt(mean(min(r, 0)^2))``), times ``sqrt(bars_per_year)``; 0 when the mean
  is not positive and there is no downside, ``inf`` when it is positive.
- ``max_drawdown``: largest fall from a running equity peak, as a fraction of
  that peak (0.25 = 25 %).
- ``calmar``: annualised return ``(final / initial) ** (bars_per_year / bars) - 1``
  divided by ``max_drawdown``; 0 without a drawdown.
- ``turnover``: notional traded (contracts x fill price x multiplier) divided by
  initial cash.
- ``fills``: steps on which an order filled (opening, adding to, reducing,
  closing or reversing a position: each bar with a non-zero fill counts once).
- ``round_trips``: positions closed, flat again or reversed (a reversal closes
  one and opens the next, so it is one round trip and one fill); a position
  still open at the window's end is not counted. A policy can fill on many bars
  and close no round trip (buy-and-hold fills once and has 0 round trips), so
  turnover beside 0 round trips is no contradiction; ``hit_rate``: share of the
  round trips that made money.
- ``exposure``: share of bars that ended with a position open.

Bankruptcy: the physics ends an episode when equity falls to zero or below
and, without auto-reset, trades no more. The backtest stops there too: it asks
the policy for nothing after that bar, holds the ruined portfolio (equity,
position) unchanged to the window's end, so every curve keeps the window's
length, and records the bar in ``bankrupt_bar`` (the market bar index whose
close marked equity at or below zero; None for a solvent account). Net P&L is
then below minus the initial cash when that one bar lost more than the account
held: the physics has no broker who absorbs the deficit, so it is reported as
it is, beside ``bankrupt_bar``. The metrics are computed over the whole window,
flat after the bankruptcy.

Baselines: *buy-and-hold* holds one contract long, bought with a market order
at NORMAL urgency on the first bar and held to the end (same costs and margin
rule); *flat* never trades.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import structlog
import torch

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.env.config import EnvConfig
from foxhunt.env.physics import CONTRACT_EPSILON
from foxhunt.contract import PLAN_THRESHOLD
from foxhunt.env.plans import run_plan_step
from foxhunt.env.tables import PLAN, PS
from foxhunt.env.vector import VectorEnv
from foxhunt.kernels.context import KernelContext

__all__ = ["BarPolicy", "BacktestResult", "BacktestReport", "backtest", "backtest_with_baselines", "result_from_history", "margin_call_steps", "constant_policy", "baselines", "equity_ratios",
           "StepKernel"]

log = structlog.get_logger(__name__)

METRIC_KEYS = (
    "net_pnl", "sharpe", "sortino", "max_drawdown", "calmar", "turnover", "fills", "round_trips", "hit_rate", "exposure",
)

Policy = Callable[[torch.Tensor], Any]


@attrs.frozen
class BarPolicy:
    """A policy that also reads the bar each observation shows: ``act(obs [N, obs], bars [N]) -> actions``.

    An encoder with a window of W bars gathers the W - 1 feature rows before each bar from the feature matrix
    (:mod:`foxhunt.learner.encoders`); :func:`backtest` hands it the environment's ``PS.BAR`` column."""

    act: Callable[[torch.Tensor, torch.Tensor | None], Any]

    def __call__(self, obs: torch.Tensor, bars: torch.Tensor | None = None) -> Any:
        return self.act(obs, bars)


StepKernel = Callable[[KernelContext], None]  # a Kernel record's run: one bar of every environment in the context


@attrs.frozen
class BacktestResult:
    """Metrics of one backtest plus its equity curve (``equity[0]`` is the initial cash).

    ``bankrupt_bar``: the market bar at whose close equity reached zero or below (the backtest traded no more
    after it), or None when the account stayed solvent. ``margin_calls``: the steps that began with a position
    larger than the account's margin allowed (equity × ``margin_fraction`` / the instrument's initial margin),
    which the physics cuts to that size whatever the policy asked; ``first_margin_call_bar`` is the market bar
    the first such cut filled on, or None.
    """

    net_pnl: float
    sharpe: float
    sortino: float
    max_drawdown: float
    calmar: float
    turnover: float
    fills: int
    round_trips: int
    hit_rate: float
    exposure: float
    equity: np.ndarray = attrs.field(eq=False, repr=False)
    bankrupt_bar: int | None = None
    margin_calls: int = 0
    first_margin_call_bar: int | None = None
    plan_exits: dict[str, int] | None = None  # with trade plans: positions closed by "stops", "targets", "expiries"

    def to_dict(self) -> dict[str, Any]:
        """Metrics by name (``METRIC_KEYS``), ``bankrupt_bar`` and the equity curve as a list under ``equity``."""
        values: dict[str, Any] = {key: getattr(self, key) for key in METRIC_KEYS}
        values["bankrupt_bar"] = self.bankrupt_bar
        values["margin_calls"] = self.margin_calls
        values["first_margin_call_bar"] = self.first_margin_call_bar
        if self.plan_exits is not None:
            values["plan_exits"] = dict(self.plan_exits)
        values["equity"] = [float(v) for v in self.equity]
        return values


@attrs.frozen
class BacktestReport:
    """The policy's backtest beside the buy-and-hold and always-flat baselines."""

    agent: BacktestResult
    buy_and_hold: BacktestResult
    flat: BacktestResult

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {"agent": self.agent.to_dict(), "buy_and_hold": self.buy_and_hold.to_dict(), "flat": self.flat.to_dict()}


def constant_policy(direction: Direction, magnitude: Magnitude = Magnitude.FULL, device: str = "cpu") -> Policy:
    """A policy that always sends the same market order (NORMAL urgency)."""
    action = torch.zeros((1, Branch.size()), dtype=torch.int64, device=device)
    action[0, Branch.DIRECTION] = direction
    action[0, Branch.MAGNITUDE] = magnitude
    action[0, Branch.ORDER_TYPE] = OrderType.MARKET
    action[0, Branch.URGENCY] = Urgency.NORMAL
    return lambda obs: action


def _annualised_ratio(mean: float, deviation: float, bars_per_year: float) -> float:
    if deviation > 0:
        return mean / deviation * math.sqrt(bars_per_year)
    return math.inf if mean > 0 else 0.0


def equity_ratios(equity: np.ndarray, bars_per_year: float) -> tuple[float, float, float]:
    """Annualised Sharpe and Sortino of an equity curve's per-bar returns, and its max drawdown (a fraction)."""
    returns = equity[1:] / equity[:-1] - 1.0
    if len(returns) > 1 and np.std(returns, ddof=1) > 0:
        sharpe = float(np.mean(returns) / np.std(returns, ddof=1) * math.sqrt(bars_per_year))
    else:
        sharpe = 0.0
    mean = float(np.mean(returns)) if len(returns) else 0.0
    downside = float(np.sqrt(np.mean(np.minimum(returns, 0.0) ** 2))) if len(returns) else 0.0
    sortino = 0.0 if mean == 0 and downside == 0 else _annualised_ratio(mean, downside, bars_per_year)
    peaks = np.maximum.accumulate(equity)
    return sharpe, sortino, float(np.max((peaks - equity) / peaks))


def margin_call_steps(history: np.ndarray, initial_cash: float, initial_margin: float, margin_fraction: float) -> np.ndarray:
    """Indices of the steps of ``history`` that began holding more contracts than the margin allowed.

    Step ``t`` decides on the portfolio after step ``t - 1`` (the initial cash and no position before the first):
    the physics caps every target at ``floor(equity × margin_fraction / initial_margin)`` contracts, so a
    position above that is cut at the market in step ``t``. An instrument without initial margin has no calls.
    """
    if initial_margin <= 0.0 or not len(history):
        return np.zeros(0, dtype=np.int64)
    position = np.concatenate([[0.0], history[:-1, PS.POSITION]])
    equity = np.concatenate([[initial_cash], history[:-1, PS.EQUITY]])
    allowed = np.floor(np.maximum(equity, 0.0) * margin_fraction / initial_margin + CONTRACT_EPSILON)
    return np.flatnonzero(np.abs(position) > allowed)


def result_from_history(history: np.ndarray, initial_cash: float, bars_per_year: float, *, initial_margin: float = 0.0,
                        margin_fraction: float = 1.0) -> BacktestResult:
    """Metrics from the portfolio rows ``[bars, PS]`` recorded after each step (margin: see :func:`margin_call_steps`)."""
    equity = np.concatenate([[initial_cash], history[:, PS.EQUITY]]).astype(np.float64)
    sharpe, sortino, max_drawdown = equity_ratios(equity, bars_per_year)
    bars = len(equity) - 1
    growth = equity[-1] / equity[0]
    annual_return = growth ** (bars_per_year / bars) - 1.0 if bars and growth > 0 else -1.0
    last = history[-1] if len(history) else np.zeros(PS.size())
    round_trips = int(last[PS.TRADES])
    ruined = np.flatnonzero(history[:, PS.EQUITY] <= 0.0)
    # Rows after the ruinous one repeat it (the backtest traded no more), its fill included: not counted again.
    traded = history[: ruined[0] + 1] if ruined.size else history
    calls = margin_call_steps(history, initial_cash, initial_margin, margin_fraction)
    return BacktestResult(
        net_pnl=float(equity[-1] - equity[0]),
        sharpe=sharpe,
        sortino=sortino,
        max_drawdown=max_drawdown,
        calmar=float(annual_return / max_drawdown) if max_drawdown > 0 else 0.0,
        turnover=float(last[PS.TURNOVER] / initial_cash),
        fills=int(np.count_nonzero(traded[:, PS.FILL_QTY])),
        round_trips=round_trips,
        hit_rate=float(last[PS.WINS] / round_trips) if round_trips else 0.0,
        exposure=float(np.mean(history[:, PS.POSITION] != 0)) if len(history) else 0.0,
        equity=equity,
        bankrupt_bar=int(history[ruined[0], PS.BAR]) if ruined.size else None,
        margin_calls=int(calls.size),
        first_margin_call_bar=int(history[calls[0], PS.BAR]) if calls.size else None,
    )


def backtest(
    policy: Policy | BarPolicy,
    prices: np.ndarray | torch.Tensor,
    features: np.ndarray | torch.Tensor,
    instrument: InstrumentSpec,
    config: EnvConfig,
    *,
    window: tuple[int, int] | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float64,
    health: torch.Tensor | None = None,
    step_kernel: StepKernel | None = None,
    isv: torch.Tensor | None = None,
    layout: Any = None,
) -> BacktestResult:
    """Run ``policy`` (observation ``[1, obs]`` -> actions ``[1, Branch]``; a :class:`BarPolicy` is also given
    the bar ``[1]``) greedily over ``window``, each bar stepped by ``step_kernel`` (the core physics when None).

    ``isv`` and ``layout``, a run's ISV (any device: it is copied to ``device``) and its layout, are what the
    kernel reads besides the environment's buffers: the trade_plans plugin's step
    (:func:`foxhunt.env.plans.run_plan_step`) reads its parameters there, and its result's ``plan_exits`` counts
    how the plans ended."""
    n_bars = len(prices)
    start, end = (0, n_bars) if window is None else window
    steps = end - start - 1
    episode = attrs.evolve(config, n_envs=1, episode_bars=max(steps, 1))
    env = VectorEnv(
        prices, features, instrument, episode,
        window=(start, end), device=device, dtype=dtype, health=health, random_start=False, auto_reset=False,
        step_kernel=step_kernel, isv=None if isv is None else isv.detach().to(device).clone(), layout=layout,
    )
    history = torch.zeros((steps, PS.size()), dtype=dtype, device=env.device)
    obs = env.reset()
    for bar in range(steps):
        chosen = policy(obs, env.state[:, PS.BAR]) if isinstance(policy, BarPolicy) else policy(obs)
        actions = torch.as_tensor(chosen, device=env.device).reshape(1, Branch.size())
        obs, _, done = env.step(actions)
        history[bar] = env.state[0]
        if bar + 1 < steps and bool(done[0]):
            # Done before the window's last bar: only bankruptcy ends this episode (episode_bars spans the
            # window). The kernel leaves a finished environment as it is, so the rest of the window is that
            # row, exactly what stepping on would record, without asking the policy for more actions.
            history[bar + 1 :] = history[bar]
            break
    result = result_from_history(history.cpu().numpy(), config.initial_cash, instrument.bars_per_year,
                                 initial_margin=instrument.initial_margin, margin_fraction=config.margin_fraction)
    if step_kernel is run_plan_step:
        row = env.plan[0].cpu().numpy()
        result = attrs.evolve(result, plan_exits={"stops": int(row[PLAN.STOPS]), "targets": int(row[PLAN.TARGETS]),
                                                  "expiries": int(row[PLAN.EXPIRIES])})
    if result.margin_calls:
        log.warning("backtest_margin_call", first_bar=result.first_margin_call_bar, calls=result.margin_calls,
                    window=[start, end])
    if result.bankrupt_bar is not None:
        log.warning("backtest_bankrupt", bar=result.bankrupt_bar, equity=float(result.equity[-1]),
                    initial_cash=config.initial_cash, window=[start, end])
    return result


def baselines(
    prices: np.ndarray | torch.Tensor,
    features: np.ndarray | torch.Tensor,
    instrument: InstrumentSpec,
    config: EnvConfig,
    **options: Any,
) -> dict[str, BacktestResult]:
    """One contract bought at market and held (``buy_and_hold``), and staying ``flat``, over the same window
    (``options`` are :func:`backtest`'s, ``step_kernel`` among them: the baselines trade under the same physics).

    With a run's ISV that has the trade plans' slots (``isv``, ``layout``), no plan opens for a baseline (its
    threshold is set above any conviction in a copy): buy-and-hold stays bought whatever a plan would do."""
    device = str(options.get("device", "cpu"))
    isv, layout = options.get("isv"), options.get("layout")
    if isv is not None and layout is not None and PLAN_THRESHOLD in layout.offsets:
        isv = isv.detach().clone()
        isv[layout.span(PLAN_THRESHOLD)] = math.inf
        options = {**options, "isv": isv}
    one_contract = attrs.evolve(config, max_contracts=1, kelly_min_contracts=1)
    return {
        "buy_and_hold": backtest(
            constant_policy(Direction.LONG, device=device), prices, features, instrument, one_contract, **options
        ),
        "flat": backtest(constant_policy(Direction.FLAT, device=device), prices, features, instrument, config, **options),
    }


def backtest_with_baselines(
    policy: Policy,
    prices: np.ndarray | torch.Tensor,
    features: np.ndarray | torch.Tensor,
    instrument: InstrumentSpec,
    config: EnvConfig,
    **options: Any,
) -> BacktestReport:
    """:func:`backtest` of ``policy`` beside the :func:`baselines`."""
    agent = backtest(policy, prices, features, instrument, config, **options)
    return BacktestReport(agent=agent, **baselines(prices, features, instrument, config, **options))
