"""Equity conservation, exact costs, HOLD/FLAT semantics and the position caps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from env_builders import TEST_INSTRUMENT, random_actions, synthetic_market
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.env import PS, EnvConfig, VectorEnv
from foxhunt.env.tables import OHLCV

MULTIPLIER = TEST_INSTRUMENT.multiplier
EPS = 1e-6  # whole-contract rounding tolerance of the physics


def action(direction, magnitude=Magnitude.FULL, order=OrderType.MARKET, urgency=Urgency.NORMAL) -> torch.Tensor:
    row = torch.zeros((1, Branch.size()), dtype=torch.int64)
    row[0, Branch.DIRECTION] = direction
    row[0, Branch.MAGNITUDE] = magnitude
    row[0, Branch.ORDER_TYPE] = order
    row[0, Branch.URGENCY] = urgency
    return row


def hand_market() -> tuple[np.ndarray, np.ndarray]:
    """Four bars whose fills are easy to compute by hand (columns OPEN, HIGH, LOW, CLOSE)."""
    prices = np.array(
        [
            [100.0, 100.0, 100.0, 100.0],
            [101.0, 103.0, 99.0, 102.0],
            [102.0, 104.0, 100.5, 103.0],
            [103.0, 103.5, 102.0, 102.5],
            [102.5, 103.0, 101.0, 102.0],
        ]
    )
    return prices, np.zeros((len(prices), 2), dtype=np.float32)


def hand_env(**overrides) -> VectorEnv:
    settings_ = dict(n_envs=1, episode_bars=10, max_contracts=4, margin_fraction=0.5, slippage_ticks=0.5)
    settings_.update(overrides)
    prices, features = hand_market()
    env = VectorEnv(
        prices, features, TEST_INSTRUMENT, EnvConfig(**settings_), dtype=torch.float64, random_start=False, auto_reset=False,
        execution_part=True,
    )
    env.reset()
    return env


@settings(max_examples=15)
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 60))
def test_equity_is_cash_plus_position_value_minus_costs(seed: int, steps: int) -> None:
    prices, features = synthetic_market(seed, bars=90)
    config = EnvConfig(n_envs=5, episode_bars=20, w_churn=3.0, w_holding=1.0, w_drawdown=1.0)
    env = VectorEnv(prices, features, TEST_INSTRUMENT, config, seed=seed, dtype=torch.float64)
    env.reset()
    rng = np.random.default_rng(seed)
    close = torch.from_numpy(prices[:, OHLCV.CLOSE])
    for _ in range(steps):
        env.step(torch.from_numpy(random_actions(rng, config.n_envs)))
        s = env.state
        marked = close[s[:, PS.BAR].long()]
        expected = s[:, PS.CASH] + s[:, PS.POSITION] * marked * MULTIPLIER - s[:, PS.COSTS_PAID]
        torch.testing.assert_close(s[:, PS.EQUITY], expected, rtol=1e-12, atol=1e-6)


@pytest.mark.parametrize("n_features", [1, 3, 4, 5, 8, 9])
def test_the_observation_starts_with_the_features_of_each_environments_bar(n_features: int) -> None:
    # The step copies the features four at a time and then one by one (foxhunt.env.physics.write_observation):
    # counts below, at and between multiples of four cover both loops.
    prices, features = synthetic_market(7, bars=120, n_features=n_features)
    config = EnvConfig(n_envs=6, episode_bars=15)
    env = VectorEnv(prices, features, TEST_INSTRUMENT, config, seed=7)
    env.reset()
    rng = np.random.default_rng(7)
    for _ in range(40):  # past several episode ends, so reset observations are checked too
        obs, _, _ = env.step(torch.from_numpy(random_actions(rng, config.n_envs)))
        bars = env.state[:, PS.BAR].long()
        assert torch.equal(obs[:, :n_features], torch.from_numpy(features)[bars])


def test_market_order_costs_by_hand() -> None:
    env = hand_env()
    assert env.state[0, PS.CAP] == 4  # min(4 max, floor(100000 * 0.5 / 10000) = 5 margin, 4 Kelly)
    _, reward, _ = env.step(action(Direction.LONG))
    # 4 contracts at the next open 101; per contract: (half spread 0.125 + slippage 0.125) * 50 + 2 commission.
    s = env.state[0]
    assert s[PS.POSITION] == 4 and s[PS.FILL_PRICE] == 101.0
    assert s[PS.STEP_COST] == pytest.approx(4 * 14.5)
    assert s[PS.CASH] == pytest.approx(100_000 - 4 * 101 * 50)
    assert s[PS.EQUITY] == pytest.approx(100_000 + 4 * (102 - 101) * 50 - 58)
    assert reward[0] == pytest.approx((200 - 58) / 1000.0)  # reward scale: 1 % of the initial cash
    # A PASSIVE market order would have paid (0.125 + 0.0625) * 50 + 2 = 11.375 a contract: NORMAL lost 12.5.
    assert s[PS.STEP_EXECUTION] == pytest.approx(-(58 - 4 * 11.375) / 1000.0)
    env.step(action(Direction.FLAT, urgency=Urgency.AGGRESSIVE))
    # Sold 4 at the open 102, slippage doubled: (0.125 + 0.25) * 50 + 2 = 20.75 per contract.
    s = env.state[0]
    assert s[PS.POSITION] == 0 and s[PS.STEP_COST] == pytest.approx(83.0)
    assert s[PS.STEP_EXECUTION] == pytest.approx(-(83 - 4 * 11.375) / 1000.0)
    assert s[PS.COSTS_PAID] == pytest.approx(58.0 + 83.0)
    assert s[PS.EQUITY] == pytest.approx(100_000 + 200 - 58 - 83)
    # The round trip: effective entry 101 + 14.5/50, effective exit 102 - 20.75/50.
    assert s[PS.TRADES] == 1 and s[PS.WINS] == 1
    assert s[PS.WIN_SUM] == pytest.approx(4 * ((102 - 0.415) - (101 + 0.29)) * 50)


def test_limit_orders_fill_only_when_traded_through() -> None:
    env = hand_env()
    env.step(action(Direction.LONG, Magnitude.HALF, OrderType.LIMIT, Urgency.NORMAL))
    # Limit 100 - 1 tick = 99.75; bar 1 trades down to 99: filled at the limit, commission only.
    s = env.state[0]
    assert s[PS.POSITION] == 2 and s[PS.FILL_PRICE] == 99.75 and s[PS.STEP_COST] == pytest.approx(4.0)
    env.step(action(Direction.FLAT, order=OrderType.LIMIT, urgency=Urgency.PASSIVE))
    # Sell limit 102 + 2 ticks = 102.5; bar 2 trades up to 104: filled at 102.5.
    s = env.state[0]
    assert s[PS.POSITION] == 0 and s[PS.FILL_PRICE] == 102.5
    # One winning round trip moves the maturity-blended Kelly share to 0.05 * 0.2 + 0.95 = 0.96: cap 3.
    assert env.state[0, PS.CAP] == 3
    env.step(action(Direction.LONG, order=OrderType.LIMIT, urgency=Urgency.PASSIVE))
    # Buy limit 103 - 2 ticks = 102.5; bar 3's low 102.0 trades through it: filled at the limit.
    assert env.state[0, PS.POSITION] == 3 and env.state[0, PS.FILL_PRICE] == 102.5


def test_unfilled_limit_order_costs_nothing() -> None:
    env = hand_env()
    env.step(action(Direction.SHORT, order=OrderType.LIMIT, urgency=Urgency.PASSIVE))
    # Sell limit 100 + 0.5 = 100.5: bar 1's high 103 is above it, so it fills; check the unfilled case next.
    assert env.state[0, PS.POSITION] == -4
    env.step(action(Direction.FLAT, order=OrderType.LIMIT, urgency=Urgency.PASSIVE))
    # Buy limit 102 - 0.5 = 101.5; bar 2's low is 100.5 < 101.5: fills. Now an order that cannot fill:
    cap = env.state[0, PS.CAP].item()
    assert cap == 3  # the round trip lost: the maturity-blended Kelly share shrinks the cap
    env.step(action(Direction.SHORT, order=OrderType.LIMIT, urgency=Urgency.PASSIVE))
    # Sell limit 103 + 0.5 = 103.5 on bar 3 (high 103.5): touching is not trading through.
    s = env.state[0]
    assert s[PS.POSITION] == 0 and s[PS.FILL_QTY] == 0 and s[PS.STEP_COST] == 0
    # A PASSIVE market order would have sold the 3 at bar 3's open 103 and been marked at its close 102.5:
    # 3 * 0.5 * 50 = 75 made for 3 * 11.375 = 34.125 paid. The unfilled limit made nothing: the execution lost that.
    assert s[PS.STEP_EXECUTION] == pytest.approx(-(75 - 34.125) / 1000.0)


def test_hold_keeps_and_flat_closes() -> None:
    env = hand_env()
    env.step(action(Direction.SHORT, Magnitude.QUARTER))
    assert env.state[0, PS.POSITION] == -1  # a quarter of cap 4
    costs = env.state[0, PS.COSTS_PAID].item()
    env.step(action(Direction.HOLD, Magnitude.FULL, OrderType.MARKET, Urgency.AGGRESSIVE))
    assert env.state[0, PS.POSITION] == -1 and env.state[0, PS.FILL_QTY] == 0
    assert env.state[0, PS.COSTS_PAID] == costs
    env.step(action(Direction.FLAT))
    assert env.state[0, PS.POSITION] == 0


def test_hold_over_a_shrunken_cap_is_cut_at_the_market() -> None:
    env = hand_env(margin_fraction=1.0)
    env.step(action(Direction.LONG))
    assert env.state[0, PS.POSITION] == 4
    env.state[0, PS.CAP] = 2.0  # as if equity had fallen: the next decision may hold only 2
    env.step(action(Direction.HOLD, order=OrderType.LIMIT, urgency=Urgency.PASSIVE))
    assert env.state[0, PS.POSITION] == 2 and env.state[0, PS.FILL_PRICE] == 102.0  # market, next open


def independent_cap(row: torch.Tensor, config: EnvConfig, health: float) -> float:
    """Cap recomputed from the textbook formulas, beside the kernel's cached Kelly fraction."""
    margin_cap = math.floor(max(row[PS.EQUITY].item(), 0.0) * config.margin_fraction / TEST_INSTRUMENT.initial_margin + EPS)
    wins, losses = row[PS.WINS].item(), row[PS.LOSSES].item()
    n = wins + losses
    unit = (row[PS.WIN_SUM] + row[PS.LOSS_SUM]).item() / n if n and (row[PS.WIN_SUM] + row[PS.LOSS_SUM]) > 0 else 1.0
    p = (wins + 2) / (n + 4)
    b = ((row[PS.WIN_SUM].item() + 2 * unit) / (wins + 2)) / ((row[PS.LOSS_SUM].item() + 2 * unit) / (losses + 2))
    kelly = min(max(p - (1 - p) / b, 0.0), 1.0)
    maturity = min(row[PS.TRADES].item() / config.kelly_warmup_trades, 1.0)
    fraction = maturity * kelly + 1 - maturity
    kelly_cap = max(math.floor(config.max_contracts * (0.5 + 0.5 * health) * fraction + EPS), config.kelly_min_contracts)
    return min(config.max_contracts, margin_cap, kelly_cap)


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1), health=st.sampled_from([0.0, 0.25, 1.0]))
def test_kelly_and_margin_caps_are_never_exceeded(seed: int, health: float) -> None:
    prices, features = synthetic_market(seed, bars=150)
    config = EnvConfig(n_envs=8, episode_bars=100, max_contracts=8, kelly_warmup_trades=4, margin_fraction=0.4)
    env = VectorEnv(
        prices, features, TEST_INSTRUMENT, config, seed=seed, dtype=torch.float64, health=torch.tensor([health])
    )
    env.reset()
    rng = np.random.default_rng(seed)
    for _ in range(80):
        cap_before = env.state[:, PS.CAP].clone()
        for i in range(config.n_envs):
            assert cap_before[i].item() == pytest.approx(independent_cap(env.state[i], config, health), abs=0)
        env.step(torch.from_numpy(random_actions(rng, config.n_envs)))
        moved = ~env.done
        assert bool((env.state[moved, PS.POSITION].abs() <= cap_before[moved]).all())
        # The health-coupled safety multiplier bounds every cap: max * (0.5 + 0.5 * health), floored.
        assert bool((env.state[:, PS.CAP] <= math.floor(config.max_contracts * (0.5 + 0.5 * health))).all())


@settings(max_examples=15)
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(0, 30))
def test_the_position_part_of_a_reward_is_what_a_passive_market_order_would_have_earned(seed: int, steps: int) -> None:
    # Two environments walked through the same actions are in the same state; then one places the drawn order
    # and the other the same target as a PASSIVE market order. Without the penalties that depend on the fill
    # (churn, holding, drawdown), the second's reward is the first's minus its execution part, and its own
    # execution part is zero.
    prices, features = synthetic_market(seed, bars=90)
    config = EnvConfig(n_envs=6, episode_bars=25)
    drawn, passive = (VectorEnv(prices, features, TEST_INSTRUMENT, config, seed=seed, dtype=torch.float64,
                                execution_part=True) for _ in range(2))
    drawn.reset()
    passive.reset()
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        history = torch.from_numpy(random_actions(rng, config.n_envs))
        drawn.step(history)
        passive.step(history)
    actions = torch.from_numpy(random_actions(rng, config.n_envs))
    reference = actions.clone()
    reference[:, Branch.ORDER_TYPE] = OrderType.MARKET
    reference[:, Branch.URGENCY] = Urgency.PASSIVE
    _, reward, _ = drawn.step(actions)
    _, passive_reward, _ = passive.step(reference)
    torch.testing.assert_close(passive_reward, reward - drawn.state[:, PS.STEP_EXECUTION], rtol=1e-9, atol=1e-12)
    assert torch.all(passive.state[:, PS.STEP_EXECUTION].abs() < 1e-12)


def test_an_environment_built_without_the_execution_part_leaves_it_zero_and_steps_the_same() -> None:
    # PS.STEP_EXECUTION is written only for a run that splits rewards ([learner] reward_split); every other
    # field, reward and observation is the same either way.
    prices, features = synthetic_market(4, bars=90)
    config = EnvConfig(n_envs=6, episode_bars=25)
    plain, split = (VectorEnv(prices, features, TEST_INSTRUMENT, config, seed=4, dtype=torch.float64,
                              execution_part=on) for on in (False, True))
    plain.reset()
    split.reset()
    rng = np.random.default_rng(4)
    others = [field for field in PS if field != PS.STEP_EXECUTION]
    written = torch.zeros(config.n_envs, dtype=torch.bool)
    for _ in range(40):
        actions = torch.from_numpy(random_actions(rng, config.n_envs))
        plain_out, split_out = plain.step(actions), split.step(actions)
        for a, b in zip(plain_out, split_out):
            assert torch.equal(a, b)
        assert torch.equal(plain.state[:, others], split.state[:, others])
        assert torch.all(plain.state[:, PS.STEP_EXECUTION] == 0)
        written |= split.state[:, PS.STEP_EXECUTION] != 0
    assert bool(written.any())  # the split run did write it


@pytest.mark.parametrize("row", ["env_step_row", "env_reset_row"])
def test_a_float32_environment_computes_in_float32(row: str) -> None:
    """No float64 value anywhere in the compiled step or reset of float32 buffers (their machine code, callees
    included): a Python float constant or an int mixed with a float makes numba compute in float64, which on
    CUDA doubled the registers of each live value and cost 13 % of env steps/s (docs/kernels.md)."""
    import numba
    from numba import types

    from foxhunt.env import physics

    f32, i64 = types.float32, types.int64
    by_row, by_column = (lambda dtype: types.Array(dtype, 2, "C")), (lambda dtype: types.Array(dtype, 2, "F"))
    vector = (lambda dtype: types.Array(dtype, 1, "C"))
    args = types.Tuple((by_row(f32), by_row(f32), by_column(f32), by_column(i64), by_column(i64), vector(f32),
                        vector(f32), by_column(f32), vector(f32), vector(types.boolean)))
    compiled = numba.njit(getattr(physics, row))
    compiled.compile((i64, args))
    machine_code = compiled.inspect_llvm((i64, args))
    float64_lines = [line.strip() for line in machine_code.splitlines() if " double" in line]
    assert float64_lines == []
