"""Trade plans: the plan step against the float64 reference, each exit by hand, no look-ahead, the backtest."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import torch
from env_builders import TEST_INSTRUMENT, random_actions, synthetic_market
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.env import EnvConfig, ReferenceEnv, VectorEnv, backtest, env_keys
from foxhunt.env.plans import plan_isv, plans_on, run_plan_step
from foxhunt.env.reference import PlanRules
from foxhunt.env.tables import PLAN, PS
from foxhunt.errors import FoxhuntError

CONFIG = EnvConfig(
    n_envs=6, episode_bars=25, max_contracts=6, w_holding=1.5, w_churn=20.0, churn_bars=4, w_drawdown=0.5,
    kelly_warmup_trades=3, margin_fraction=0.8,
)
EXIT_COUNTS = slice(PLAN.STOPS, PLAN.EXPIRIES + 1)


def float32_rules(stop: float, target: float, horizon: int, threshold: float) -> PlanRules:
    """The rules as the kernel reads them: the ISV holds float32 values."""
    as32 = lambda value: float(np.float32(value))  # noqa: E731
    return PlanRules(stop=as32(stop), target=as32(target), horizon=float(horizon), threshold=as32(threshold))


def holding_actions(rng: np.random.Generator, n_envs: int, hold_share: float = 0.6) -> np.ndarray:
    """Random actions, HOLD on most bars so that open plans get bars to act on."""
    actions = random_actions(rng, n_envs)
    actions[:, Branch.DIRECTION] = np.where(rng.random(n_envs) < hold_share, Direction.HOLD,
                                            actions[:, Branch.DIRECTION])
    return actions


def run_both(seed: int, steps: int, config: EnvConfig, rules: tuple[float, float, int, float], backend: str | None,
             device: str = "cpu", execution_part: bool = False) -> np.ndarray:
    """Step a plan-honouring VectorEnv and one ReferenceEnv per environment alike; every row must agree.

    Returns the exits each kind made over the run, summed over environments (from the reference)."""
    prices, features = synthetic_market(seed, bars=120)
    window = (5, 110)
    isv, layout = plan_isv(*rules, device=device)
    env = VectorEnv(prices, features, TEST_INSTRUMENT, config, window=window, seed=seed, dtype=torch.float64,
                    device=device, backend=backend, execution_part=execution_part, isv=isv, layout=layout, step_kernel=run_plan_step)
    assert plans_on(env.context)
    plan_rules = float32_rules(*rules)
    references = [
        ReferenceEnv(prices, features, TEST_INSTRUMENT, config, window=window, key=int(k),
                     execution_part=execution_part, plans=plan_rules)
        for k in env_keys(seed, config.n_envs)
    ]
    rng = np.random.default_rng(seed + 1)
    env.reset()
    for reference in references:
        reference.reset()
    exits = np.zeros(3)
    for step in range(steps):
        actions = holding_actions(rng, config.n_envs)
        before = np.array([reference.plan.as_row()[EXIT_COUNTS] for reference in references])
        obs, reward, done = (t.cpu().numpy() for t in env.step(torch.from_numpy(actions).to(device)))
        state, plan = env.state.cpu().numpy(), env.plan.cpu().numpy()
        for i, reference in enumerate(references):
            expected_obs, expected_reward, expected_done = reference.step(actions[i])
            where = f"step {step}, env {i}"
            assert bool(done[i]) == expected_done, where
            np.testing.assert_allclose(state[i], reference.portfolio.as_row(), rtol=1e-9, atol=1e-6, err_msg=where)
            np.testing.assert_allclose(plan[i], reference.plan.as_row(), rtol=1e-9, atol=1e-6, err_msg=where)
            np.testing.assert_allclose(reward[i], expected_reward, rtol=1e-9, atol=1e-9, err_msg=where)
            np.testing.assert_allclose(obs[i], expected_obs, rtol=1e-5, atol=1e-5, err_msg=where)
            if not expected_done:  # a reset zeroes the counts; otherwise they only grow, by the exit of this step
                exits += reference.plan.as_row()[EXIT_COUNTS] - before[i]
    return exits


@settings(max_examples=8)
@given(
    seed=st.integers(0, 2**31 - 1),
    stop=st.sampled_from([0.0, 0.002, 0.01]),
    target=st.sampled_from([0.0, 0.004, 0.03]),
    horizon=st.sampled_from([0, 1, 5]),
    threshold=st.sampled_from([0.0, 0.5, 1.0]),
    execution_part=st.booleans(),
)
def test_cpu_plan_kernel_matches_reference(seed: int, stop: float, target: float, horizon: int, threshold: float,
                                           execution_part: bool) -> None:
    run_both(seed, 50, CONFIG, (stop, target, horizon, threshold), "cpu", execution_part=execution_part)


def test_every_kind_of_exit_fires_and_matches_the_reference() -> None:
    # Distances of about two bars' moves and a horizon of four bars: over 90 bars of six environments each exit happens.
    long_episodes = EnvConfig(n_envs=6, episode_bars=200, max_contracts=4, kelly_warmup_trades=0)
    stops, targets, expiries = run_both(7, 90, long_episodes, (0.015, 0.015, 4, 0.0), "cpu")
    assert stops > 0 and targets > 0 and expiries > 0, (stops, targets, expiries)


def test_cuda_plan_kernel_matches_reference() -> None:
    # The real CUDA kernel on a GPU machine; elsewhere the numba simulator, on tiny sizes.
    if torch.cuda.is_available():
        run_both(11, 60, CONFIG, (0.003, 0.006, 4, 0.5), "cuda", device="cuda", execution_part=True)
    else:
        small = EnvConfig(n_envs=3, episode_bars=8, kelly_warmup_trades=2, max_contracts=4)
        run_both(11, 14, small, (0.003, 0.006, 3, 0.0), "cudasim")


# -- each rule on a hand-made market -----------------------------------------------------------------------------
def bars(rows: list[tuple[float, float, float, float]]) -> np.ndarray:
    """OHLC rows ``(open, high, low, close)`` as a ``[bars, OHLCV]`` float64 array."""
    return np.array(rows, dtype=np.float64)


FLAT_BAR = (100.0, 100.2, 99.8, 100.0)
NO_SPREAD = attrs.evolve(TEST_INSTRUMENT, spread_ticks=0.0)  # fills at the reference price: readable numbers
NO_COSTS = EnvConfig(n_envs=1, episode_bars=50, max_contracts=1, kelly_warmup_trades=0, commission=0.0,
                     slippage_ticks=0.0)


def long_then_hold(prices: np.ndarray, rules: tuple[float, float, int, float], magnitude: int = Magnitude.FULL,
                   config: EnvConfig = NO_COSTS) -> tuple[VectorEnv, list[np.ndarray], list[np.ndarray]]:
    """Buy at the first bar's close (filled at bar 1's open), then HOLD to the end; the rows after each step."""
    isv, layout = plan_isv(*rules)
    env = VectorEnv(prices, np.zeros((len(prices), 1), np.float32), NO_SPREAD, config, dtype=torch.float64,
                    random_start=False, auto_reset=False, isv=isv, layout=layout, step_kernel=run_plan_step)
    env.reset()
    states, plans = [], []
    for step in range(len(prices) - 2):
        direction = Direction.LONG if step == 0 else Direction.HOLD
        action = torch.tensor([[direction, magnitude, OrderType.MARKET, Urgency.NORMAL]])
        env.step(action)
        states.append(env.state[0].numpy().copy())
        plans.append(env.plan[0].numpy().copy())
    return env, states, plans


# Distances that float32 (the ISV's type) holds exactly, so the levels are exact: 100 × (1 ∓ 1/64, 1 + 1/32).
STOP, STOP_PRICE = 1 / 64, 98.4375
TARGET, TARGET_PRICE = 1 / 32, 103.125


def test_a_long_is_stopped_on_the_first_bar_whose_low_reaches_the_stop_at_the_stop_price() -> None:
    # Entry at bar 1's open, 100. Bar 2's low 98.45 does not reach the stop, bar 3's 98.2 does.
    prices = bars([FLAT_BAR, FLAT_BAR, (100.0, 100.3, 98.45, 99.5), (99.4, 99.6, 98.2, 99.2), FLAT_BAR, FLAT_BAR])
    _, states, plans = long_then_hold(prices, (STOP, 0.0, 0, 0.0))
    assert plans[0][PLAN.SIDE] == 1.0 and plans[0][PLAN.ENTRY] == 100.0
    assert plans[0][PLAN.STOP] == STOP_PRICE
    assert states[1][PS.POSITION] == 1.0 and states[1][PS.FILL_QTY] == 0.0  # bar 2: not reached
    assert states[2][PS.FILL_QTY] == -1.0 and states[2][PS.FILL_PRICE] == STOP_PRICE  # bar 3
    assert states[2][PS.POSITION] == 0.0
    assert plans[2][PLAN.SIDE] == 0.0 and plans[2][PLAN.STOPS] == 1.0


def test_a_stop_the_bar_opens_beyond_fills_at_the_open() -> None:
    prices = bars([FLAT_BAR, FLAT_BAR, (98.0, 99.0, 97.5, 98.8), FLAT_BAR, FLAT_BAR])  # opens below the stop
    _, states, _ = long_then_hold(prices, (STOP, 0.0, 0, 0.0))
    assert states[1][PS.FILL_QTY] == -1.0 and states[1][PS.FILL_PRICE] == 98.0


def test_a_target_fills_only_when_a_bar_trades_through_it_at_the_target() -> None:
    # Bar 2's high touches the target exactly (a resting limit is not filled on a touch); bar 3 trades through it.
    prices = bars([FLAT_BAR, FLAT_BAR, (100.5, TARGET_PRICE, 100.4, 101.5), (101.6, 103.5, 101.5, 102.2), FLAT_BAR])
    _, states, plans = long_then_hold(prices, (0.0, TARGET, 0, 0.0))
    assert plans[0][PLAN.TARGET] == TARGET_PRICE
    assert states[1][PS.FILL_QTY] == 0.0
    assert states[2][PS.FILL_QTY] == -1.0 and states[2][PS.FILL_PRICE] == TARGET_PRICE
    assert plans[2][PLAN.TARGETS] == 1.0


def test_a_bar_that_reaches_stop_and_target_counts_as_a_stop() -> None:
    prices = bars([FLAT_BAR, FLAT_BAR, (100.0, 104.0, 98.0, 100.0), FLAT_BAR, FLAT_BAR])
    _, states, plans = long_then_hold(prices, (STOP, TARGET, 0, 0.0))
    assert states[1][PS.FILL_PRICE] == STOP_PRICE
    assert plans[1][PLAN.STOPS] == 1.0 and plans[1][PLAN.TARGETS] == 0.0


def test_the_horizon_closes_the_position_at_the_open_after_its_last_bar() -> None:
    # Filled on bar 1, a horizon of 3 bars: held through bars 1..4, closed at bar 5's open.
    prices = bars([FLAT_BAR] * 5 + [(100.7, 100.9, 100.5, 100.8)] + [FLAT_BAR] * 2)
    _, states, plans = long_then_hold(prices, (0.0, 0.0, 3, 0.0))
    assert plans[0][PLAN.EXPIRY] == 4.0
    assert [row[PS.FILL_QTY] for row in states[:5]] == [1.0, 0.0, 0.0, 0.0, -1.0]
    assert states[4][PS.FILL_PRICE] == 100.7 and plans[4][PLAN.EXPIRIES] == 1.0


def test_an_entry_below_the_threshold_opens_no_plan() -> None:
    prices = bars([FLAT_BAR, FLAT_BAR, (100.0, 100.3, 95.0, 99.5), FLAT_BAR, FLAT_BAR])
    config = EnvConfig(n_envs=1, episode_bars=50, max_contracts=4, kelly_warmup_trades=0, commission=0.0,
                       slippage_ticks=0.0)
    _, states, plans = long_then_hold(prices, (STOP, 0.0, 0, 0.5), magnitude=Magnitude.QUARTER, config=config)
    assert plans[0][PLAN.SIDE] == 0.0  # a quarter of the cap is below 0.5
    assert states[1][PS.POSITION] == 1.0 and states[1][PS.FILL_QTY] == 0.0  # no stop: still long
    _, _, plans = long_then_hold(prices, (STOP, 0.0, 0, 0.5), magnitude=Magnitude.HALF, config=config)
    assert plans[0][PLAN.SIDE] == 1.0 and plans[0][PLAN.CONVICTION] == 0.5


def test_an_action_that_changes_the_position_replaces_the_plan_for_that_bar() -> None:
    # Bar 2 reaches the stop, but the agent sells at bar 1's close: its market order fills at bar 2's open.
    prices = bars([FLAT_BAR, FLAT_BAR, (100.1, 100.3, 95.0, 99.5), FLAT_BAR])
    isv, layout = plan_isv(0.01, 0.0, 0)
    env = VectorEnv(prices, np.zeros((len(prices), 1), np.float32), NO_SPREAD, NO_COSTS, dtype=torch.float64,
                    random_start=False, auto_reset=False, isv=isv, layout=layout, step_kernel=run_plan_step)
    env.reset()
    env.step(torch.tensor([[Direction.LONG, Magnitude.FULL, OrderType.MARKET, Urgency.NORMAL]]))
    env.step(torch.tensor([[Direction.FLAT, Magnitude.FULL, OrderType.MARKET, Urgency.NORMAL]]))
    assert env.state[0, PS.FILL_PRICE].item() == 100.1 and env.plan[0, PLAN.STOPS].item() == 0.0


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1), cut=st.integers(20, 80))
def test_no_step_reads_a_bar_after_the_one_it_fills_on(seed: int, cut: int) -> None:
    """Two markets equal up to bar ``cut`` and different after it: every step that fills on a bar up to ``cut``
    leaves the same portfolio and plan in both."""
    prices, features = synthetic_market(seed, bars=100)
    changed = prices.copy()
    changed[cut + 1 :] *= np.random.default_rng(seed).uniform(0.9, 1.1, size=(len(prices) - cut - 1, 1))
    config = EnvConfig(n_envs=4, episode_bars=200, max_contracts=3, kelly_warmup_trades=0)
    rows = []
    for market in (prices, changed):
        isv, layout = plan_isv(0.003, 0.005, 4)
        env = VectorEnv(market, features, TEST_INSTRUMENT, config, seed=seed, dtype=torch.float64,
                        random_start=False, isv=isv, layout=layout, step_kernel=run_plan_step)
        env.reset()
        rng = np.random.default_rng(seed + 1)
        history = []
        for _ in range(cut):  # the step from bar t fills on bar t + 1 <= cut
            env.step(torch.from_numpy(holding_actions(rng, config.n_envs)))
            history.append(np.concatenate([env.state.numpy(), env.plan.numpy()], axis=1))
        rows.append(np.array(history))
    np.testing.assert_array_equal(rows[0], rows[1])


def test_the_backtest_honours_plans_and_counts_their_exits() -> None:
    prices, features = synthetic_market(4, bars=160)
    config = EnvConfig(n_envs=1, episode_bars=200, max_contracts=2, kelly_warmup_trades=0)

    def always_long(obs: torch.Tensor) -> torch.Tensor:
        return torch.tensor([[Direction.LONG, Magnitude.FULL, OrderType.MARKET, Urgency.NORMAL]])

    plain = backtest(always_long, prices, features, TEST_INSTRUMENT, config)
    isv, layout = plan_isv(0.004, 0.004, 8)
    planned = backtest(always_long, prices, features, TEST_INSTRUMENT, config, isv=isv, layout=layout, step_kernel=run_plan_step)
    assert plain.plan_exits is None and plain.round_trips == 0  # LONG again is HOLD: bought once, held
    exits = planned.plan_exits
    assert exits is not None and exits["stops"] + exits["targets"] + exits["expiries"] == planned.round_trips > 0
    # The same policy stepped by hand through a plan-honouring environment ends with the same equity.
    env = VectorEnv(prices, features, TEST_INSTRUMENT, attrs.evolve(config, episode_bars=159), dtype=torch.float64,
                    window=(0, 160), random_start=False, auto_reset=False, isv=isv, layout=layout, step_kernel=run_plan_step)
    obs = env.reset()
    for _ in range(159):
        obs, _, done = env.step(always_long(obs))
        if bool(done[0]):
            break
    assert env.state[0, PS.EQUITY].item() == pytest.approx(planned.equity[-1], rel=1e-12)


def test_the_plain_step_leaves_the_plans_alone_and_the_plan_step_needs_the_isv() -> None:
    prices, features = synthetic_market(2, bars=60)
    isv, layout = plan_isv(0.001, 0.001, 2)
    env = VectorEnv(prices, features, TEST_INSTRUMENT, CONFIG, seed=2, dtype=torch.float64, isv=isv, layout=layout)
    assert plans_on(env.context)  # the slots are there, but market_env's step does not read them
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        env.step(torch.from_numpy(holding_actions(rng, CONFIG.n_envs)))
    assert float(env.plan.abs().sum()) == 0.0
    assert env.state_dict()["plan"] is env.plan
    bare = VectorEnv(prices, features, TEST_INSTRUMENT, CONFIG, seed=2, step_kernel=run_plan_step)
    bare.reset()
    with pytest.raises(FoxhuntError, match="no ISV.*plan_isv"):
        bare.step(torch.zeros((CONFIG.n_envs, Branch.size()), dtype=torch.int64))


def test_a_float32_plan_step_computes_in_float32() -> None:
    """As the plain step (tests/env/test_physics.py): no float64 value in the compiled float32 plan step."""
    import numba
    from numba import types

    from foxhunt.env.plans import env_step_plans_row

    f32, i64 = types.float32, types.int64
    by_row, by_column = (lambda dtype: types.Array(dtype, 2, "C")), (lambda dtype: types.Array(dtype, 2, "F"))
    vector = (lambda dtype: types.Array(dtype, 1, "C"))
    args = types.Tuple((by_row(f32), by_row(f32), by_column(f32), by_column(i64), by_column(i64), vector(f32),
                        vector(f32), by_column(f32), vector(f32), vector(types.boolean), by_column(f32), vector(f32),
                        vector(f32)))
    compiled = numba.njit(env_step_plans_row)
    compiled.compile((i64, args))
    machine_code = compiled.inspect_llvm((i64, args))
    assert [line.strip() for line in machine_code.splitlines() if " double" in line] == []
