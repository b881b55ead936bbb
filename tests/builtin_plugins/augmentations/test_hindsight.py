"""Hindsight magnitude relabelling against the float64 reference environment (``foxhunt.env.reference``): on
random portfolios, caps, costs and next bars where the docs say the relabelling is exact, each selected
SHORT/LONG market order gets the magnitude whose reference reward is highest and its return moves by exactly
what that magnitude would have earned more; everything else is left alone. Off by default; commutes with the
mirror; traces as one graph."""

from __future__ import annotations

import copy

import attrs
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from foxhunt import AugmentationFold, AugmentationInputs
from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.env.config import EnvConfig, physics_params
from foxhunt.env.reference import Portfolio, ReferenceEnv
from foxhunt.env.tables import OHLCV, PortfolioObs
from foxhunt.learner import Batch
from foxhunt.plugin.host import PluginHost, PluginSelection
from foxhunt_plugins.augmentations import hindsight, mirror

N_FEATURES = 3
CASH = 1e8  # far from any margin or ruin: the reward is the cost model's alone


def market(rng: np.random.Generator) -> tuple[EnvConfig, InstrumentSpec]:
    config = EnvConfig(max_contracts=int(rng.integers(1, 12)), slippage_ticks=float(rng.uniform(0, 2)),
                       slippage_by_urgency=tuple(rng.uniform(0.2, 3.0, 3)), w_pnl=float(rng.uniform(0.5, 2.0)),
                       w_cost=float(rng.uniform(0.0, 2.0)), w_holding=float(rng.choice([0.0, rng.uniform(0, 5)])),
                       initial_cash=CASH, reward_scale=float(rng.uniform(10, 1000)), episode_bars=100)
    instrument = InstrumentSpec("X", tick_size=float(rng.uniform(0.01, 0.5)), multiplier=float(rng.uniform(1, 100)),
                                commission=float(rng.uniform(0, 5)), initial_margin=0.0, maintenance_margin=0.0,
                                spread_ticks=float(rng.uniform(0, 3)))
    return config, instrument


def transition(rng: np.random.Generator, config: EnvConfig, instrument: InstrumentSpec):
    """One decision in the reference env: its observation, action, and the reward of every magnitude."""
    cap = float(rng.integers(0, config.max_contracts + 1))
    position = float(rng.integers(-config.max_contracts, config.max_contracts + 1))
    close0 = float(rng.uniform(50, 150))
    gap = rng.random() < 0.5  # exact with a gap only from flat
    position = 0.0 if gap else position
    open1 = close0 + float(rng.normal(0, 2)) if gap else close0
    close1 = open1 + float(rng.normal(0, 2))
    prices = np.array([[close0] * 4, [open1, max(open1, close1) + 1, min(open1, close1) - 1, close1], [close1] * 4])
    prices = np.concatenate([prices, np.ones((3, 1))], axis=1)[:, : OHLCV.CLOSE + 2]
    env = ReferenceEnv(prices, rng.normal(size=(3, N_FEATURES)), instrument, config, window=(0, 3), random_start=False,
                       auto_reset=False, execution_part=True)
    env.portfolio = Portfolio(position=position, cash=CASH, equity=CASH, entry_price=close0, peak_equity=CASH,
                              bar=0, start_bar=0, opened_bar=0, last_fill_bar=0, cap=cap, kelly_fraction=1.0)
    obs = env.observation()
    action = [int(rng.integers(0, 4)), int(rng.integers(0, 3)), int(rng.integers(0, 2)), int(rng.integers(0, 3))]
    if rng.random() < 0.7:  # mostly the transitions the relabelling is about
        action[Branch.DIRECTION] = int(rng.choice([Direction.SHORT, Direction.LONG]))
        action[Branch.ORDER_TYPE] = OrderType.MARKET
    rewards, executions = [], []
    for magnitude in Magnitude:
        trial = copy.deepcopy(env)
        changed = list(action)
        changed[Branch.MAGNITUDE] = magnitude
        rewards.append(trial.step(changed)[1])
        executions.append(trial.portfolio.step_execution)
    taken_target = copy.deepcopy(env)._target(action[Branch.DIRECTION], action[Branch.MAGNITUDE])
    return obs, action, np.array(rewards), taken_target, np.array(executions)


def reference_batch(seed: int, size: int = 24):
    rng = np.random.default_rng(seed)
    config, instrument = market(rng)
    rows = [transition(rng, config, instrument) for _ in range(size)]
    obs = np.stack([row[0] for row in rows])
    actions = np.array([row[1] for row in rows])
    by_magnitude = np.stack([row[2] for row in rows])  # [B, Magnitude] reference rewards
    taken = by_magnitude[np.arange(size), actions[:, Branch.MAGNITUDE]]
    targets = np.array([row[3] for row in rows])
    returns = taken[:, None] + rng.normal(size=(size, len(Branch)))  # later terms of an n-step return
    fold = AugmentationFold(("a",) * N_FEATURES, None, physics_params(config, instrument, (0, 3)))
    executions = np.stack([row[4] for row in rows])  # [B, Magnitude] the reference's execution parts
    return obs, actions, by_magnitude, taken, targets, returns, fold, executions


def relabelled(obs, actions, rewards, returns, fold, dtype, selected=None):
    tensors = {k: torch.as_tensor(np.asarray(v)).to(dtype if np.asarray(v).dtype.kind == "f" else torch.int64)
               for k, v in hindsight.hindsight_constants(fold).items()}
    size = obs.shape[0]
    batch = Batch(obs=torch.as_tensor(obs).to(dtype), actions=torch.as_tensor(actions), returns=torch.as_tensor(returns).to(dtype),
                  discounts=torch.ones(size, len(Branch), dtype=dtype), next_obs=torch.as_tensor(obs).to(dtype),
                  weights=torch.ones(size, dtype=dtype), indices=torch.arange(size))
    selected = torch.ones(size, 1, dtype=torch.bool) if selected is None else selected
    inputs = AugmentationInputs(batch, selected, torch.as_tensor(rewards).to(dtype), tensors)
    return batch, hindsight.relabel_magnitude(inputs)


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-9), (torch.float32, 2e-4)])
@given(seed=st.integers(0, 2**32 - 1))
def test_the_relabelled_magnitude_is_the_reference_envs_best(dtype: torch.dtype, tolerance: float, seed: int) -> None:
    obs, actions, by_magnitude, taken, targets, returns, fold, _ = reference_batch(seed)
    _, out = relabelled(obs, actions, taken, returns, fold, dtype)
    eligible = (np.isin(actions[:, Branch.DIRECTION], [Direction.SHORT, Direction.LONG])
                & (actions[:, Branch.ORDER_TYPE] == OrderType.MARKET) & (targets != 0))
    scale = np.abs(by_magnitude).max(1) + 1.0
    best = by_magnitude.argmax(1)
    gain = by_magnitude.max(1) - taken
    change = eligible & (gain > tolerance * scale)
    got = out.actions.numpy()
    for i in range(len(actions)):
        if change[i] and np.sort(by_magnitude[i])[-1] - np.sort(by_magnitude[i])[-2] > tolerance * scale[i]:
            assert got[i, Branch.MAGNITUDE] == best[i], i
        if not eligible[i]:
            assert (got[i] == actions[i]).all(), i
        others = [b for b in Branch if b != Branch.MAGNITUDE]
        assert (got[i, others] == actions[i, others]).all(), i
    # whichever of near-equal magnitudes it picked, it earned the reference's best, and never less than taken
    expected = returns + np.where(eligible, gain, 0.0)[:, None]
    np.testing.assert_allclose(out.returns.double().numpy(), expected, atol=tolerance * scale.max() * 4, rtol=0)
    chosen = by_magnitude[np.arange(len(actions)), got[:, Branch.MAGNITUDE]]
    assert np.all(chosen >= taken - tolerance * scale)


@given(seed=st.integers(0, 2**32 - 1))
def test_with_the_reward_split_each_branch_gains_its_own_part(seed: int) -> None:
    # [learner] reward_split: order type and urgency learn from the reward's execution part, direction and
    # magnitude from the rest, so a relabelled return moves by each part's change in the reference env.
    obs, actions, by_magnitude, taken, targets, returns, fold, executions = reference_batch(seed)
    fold = attrs.evolve(fold, execution_branches=(Branch.ORDER_TYPE, Branch.URGENCY))
    _, out = relabelled(obs, actions, taken, returns, fold, torch.float64)
    got = out.actions.numpy()[:, Branch.MAGNITUDE]
    rows = np.arange(len(actions))
    relabelled_rows = got != actions[:, Branch.MAGNITUDE]
    execution_gain = executions[rows, got] - executions[rows, actions[:, Branch.MAGNITUDE]]
    position_gain = by_magnitude[rows, got] - taken - execution_gain
    expected = returns.copy()
    for branch in Branch:
        part = execution_gain if branch in (Branch.ORDER_TYPE, Branch.URGENCY) else position_gain
        expected[:, branch] += np.where(relabelled_rows, part, 0.0)
    scale = np.abs(by_magnitude).max() + 1.0
    np.testing.assert_allclose(out.returns.numpy(), expected, atol=1e-9 * scale, rtol=0)
    # one position branch and one execution branch together gain what the whole reward gained
    moved = out.returns.numpy() - returns
    np.testing.assert_allclose(moved[:, Branch.DIRECTION] + moved[:, Branch.URGENCY],
                               np.where(relabelled_rows, by_magnitude[rows, got] - taken, 0.0), atol=1e-9 * scale, rtol=0)


def test_only_the_selected_positions_change() -> None:
    obs, actions, _, taken, _, returns, fold, _ = reference_batch(7, size=16)
    selected = (torch.arange(16) % 4 == 3)[:, None]
    batch, out = relabelled(obs, actions, taken, returns, fold, torch.float64, selected)
    _, every = relabelled(obs, actions, taken, returns, fold, torch.float64)
    keep = ~selected[:, 0]
    assert torch.equal(out.actions[keep], batch.actions[keep]) and torch.equal(out.returns[keep], batch.returns[keep])
    assert torch.equal(out.actions[~keep], every.actions[~keep])
    assert not torch.equal(every.actions, batch.actions)  # the draw has something to relabel
    for field in ("obs", "next_obs", "discounts", "weights", "indices"):
        assert torch.equal(getattr(out, field), getattr(batch, field))


@pytest.mark.parametrize("window", [2, 5])
def test_a_windowed_observation_is_relabelled_as_its_one_bar_observation(window: int) -> None:
    """With an encoder window the replay's observation is ``[W × F + P]``: the earlier bars' features come first
    and the portfolio columns still close it, so the relabelling reads the same position and cap."""
    obs, actions, _, taken, _, returns, fold, _ = reference_batch(5, size=16)
    earlier = np.random.default_rng(window).normal(size=(16, (window - 1) * N_FEATURES)) * 5.0
    _, one_bar = relabelled(obs, actions, taken, returns, fold, torch.float64)
    windowed_fold = AugmentationFold(fold.feature_names, None, fold.env_params, window=window)
    _, windowed = relabelled(np.concatenate([earlier, obs], 1), actions, taken, returns, windowed_fold, torch.float64)
    assert not torch.equal(one_bar.actions, torch.as_tensor(actions))  # the draw has something to relabel
    assert torch.equal(windowed.actions, one_bar.actions) and torch.equal(windowed.returns, one_bar.returns)


def test_it_commutes_with_the_mirror() -> None:
    """The mirrored market's best size is the same: P&L and costs of a trade and of its mirror are equal."""
    obs, actions, _, taken, _, returns, fold, _ = reference_batch(11, size=16)
    n = len(PortfolioObs)
    width = obs.shape[1]
    constants = {"scale": np.ones(width), "shift": np.zeros(width), "low": np.full(width, -np.inf),
                 "high": np.full(width, np.inf)}
    constants["scale"][width - n + PortfolioObs.POSITION] = -1.0
    constants["scale"][: width - n] = -1.0
    codes = np.array([Direction.LONG, Direction.HOLD, Direction.SHORT, Direction.FLAT])
    constants.update(codes=codes, columns=np.arange(len(Branch)) == Branch.DIRECTION)
    tensors = {k: torch.as_tensor(v) for k, v in constants.items()}
    batch, _ = relabelled(obs, actions, taken, returns, fold, torch.float64)
    every = torch.ones(16, 1, dtype=torch.bool)
    flipped = mirror.mirror_batch(AugmentationInputs(batch, every, torch.as_tensor(taken), tensors))
    relabel_then_mirror = mirror.mirror_batch(AugmentationInputs(
        relabelled(obs, actions, taken, returns, fold, torch.float64)[1], every, torch.as_tensor(taken), tensors))
    _, mirror_then_relabel = relabelled(flipped.obs.numpy(), flipped.actions.numpy(), taken, flipped.returns.numpy(),
                                        fold, torch.float64)
    assert torch.equal(relabel_then_mirror.actions, mirror_then_relabel.actions)
    torch.testing.assert_close(relabel_then_mirror.returns, mirror_then_relabel.returns, rtol=0, atol=1e-12)


def test_off_by_default_and_on_when_switched() -> None:
    def frozen(settings):
        host = PluginHost(PluginSelection(settings=settings))
        host.add_plugin(hindsight, hindsight.NAME)
        host.declare()
        host.freeze()
        return host

    assert frozen({}).replay_augmentations(None) == []
    on = frozen({"hindsight": {"enabled": True, "fraction": 0.5}}).replay_augmentations(None)
    assert [(r.name, r.fraction) for r in on] == [("hindsight", 0.5)]


def test_relabelling_traces_as_one_graph() -> None:
    obs, actions, _, taken, _, returns, fold, _ = reference_batch(3, size=8)
    batch, eager = relabelled(obs, actions, taken, returns, fold, torch.float32)
    tensors = {k: torch.as_tensor(np.asarray(v)).to(torch.float32) for k, v in hindsight.hindsight_constants(fold).items()}
    inputs = AugmentationInputs(batch, torch.ones(8, 1, dtype=torch.bool), torch.as_tensor(taken).float(), tensors)
    compiled = torch.compile(hindsight.relabel_magnitude, backend="eager", fullgraph=True)(inputs)
    assert torch.equal(compiled.actions, eager.actions)
    torch.testing.assert_close(compiled.returns, eager.returns)
