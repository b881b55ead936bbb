"""Auxiliary tasks' share of the core: the future-return table against a float64 loop (its mask, its scale, and
that it never reads a close at or after the training window's end), the head's column layout, the replay
gathering each transition's row by its stored bar, the network's optional head, and LossInputs.auxiliary."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt import AuxiliaryTask, LossComponent, hookimpl
from foxhunt.actions import Branch
from foxhunt.learner import Replay, ReplayConfig, auxiliary_layout, future_return_table
from foxhunt.learner.network import BranchingNetwork

GAMMA = torch.full((len(Branch),), 0.9)
TOY, TOY_B = "toy_aux", "toy_b"
TOY_TASK = AuxiliaryTask(outputs=2, horizon=3)


def reference_table(close: np.ndarray, start: int, stop: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 loop: returns[t, h] = log(c[t+h+1] / c[t+h]) / σ for start <= t, t+h+1 < stop (else 0, invalid);
    σ the population std of the one-bar log-returns log(c[t+1] / c[t]) for t in [start, stop - 1), 1 when it is
    0 or there are fewer than two of them."""
    inside = [math.log(close[t + 1] / close[t]) for t in range(start, stop - 1)]
    sigma = 1.0
    if len(inside) >= 2:
        mean = sum(inside) / len(inside)
        std = math.sqrt(sum((r - mean) ** 2 for r in inside) / len(inside))
        sigma = std if std > 0.0 else 1.0
    bars = len(close)
    returns = np.zeros((bars, horizon))
    valid = np.zeros((bars, horizon))
    for t in range(bars):
        for h in range(horizon):
            if t >= start and t + h + 1 < stop:
                valid[t, h] = 1.0
                returns[t, h] = math.log(close[t + h + 1] / close[t + h]) / sigma
    return returns, valid


def random_close(rng: np.random.Generator, bars: int) -> np.ndarray:
    """A positive price path: a random walk in log price, at a random level and volatility."""
    return float(rng.uniform(1.0, 500.0)) * np.exp(np.cumsum(rng.normal(0.0, float(rng.uniform(1e-3, 0.1)), bars)))


def assert_table_matches(close: np.ndarray, start: int, stop: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    returns, valid = future_return_table(close, start, stop, horizon)
    expected, expected_valid = reference_table(close, start, stop, horizon)
    assert returns.dtype == np.float32 and valid.dtype == np.float32
    assert returns.shape == valid.shape == (len(close), horizon)
    np.testing.assert_array_equal(valid, expected_valid)
    np.testing.assert_allclose(returns, expected, rtol=1e-5, atol=1e-6)
    assert not returns[valid == 0].any()  # exactly 0 outside the mask
    return returns, valid


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bars=st.integers(2, 40), horizon=st.integers(1, 6), data=st.data())
def test_the_future_return_table_against_a_float64_loop(seed: int, bars: int, horizon: int, data) -> None:
    start = data.draw(st.integers(0, bars - 1), label="start")
    stop = data.draw(st.integers(start + 1, bars), label="stop")
    assert_table_matches(random_close(np.random.default_rng(seed), bars), start, stop, horizon)


def test_a_window_in_the_middle_of_the_bars() -> None:
    close = random_close(np.random.default_rng(3), 50)
    returns, valid = assert_table_matches(close, 10, 30, 4)
    # bars before the window and rows whose every return leaves it are wholly masked
    assert not valid[:10].any() and not valid[29:].any()
    # the last rows lose their far columns first: t + h + 1 < 30
    assert valid[26].tolist() == [1, 1, 1, 0] and valid[28].tolist() == [1, 0, 0, 0] and valid[10].all()
    # in units of the window's own one-bar move: the window's first-column returns have population std 1
    inside = returns[10:29, 0]
    assert float(np.std(inside.astype(np.float64))) == pytest.approx(1.0, rel=1e-5)
    # the scale is the window's: a run of wild bars outside it changes no valid entry
    wild = close.copy()
    wild[:10] *= np.exp(np.random.default_rng(4).normal(0, 2.0, 10))
    np.testing.assert_array_equal(future_return_table(wild, 10, 30, 4)[0], returns)


def test_a_window_of_two_bars_is_not_scaled() -> None:
    """One return inside the window: no spread to measure, so σ = 1 and the target is the raw log-return."""
    close = np.array([100.0, 101.0, 99.0, 105.0, 90.0])
    returns, valid = future_return_table(close, 1, 3, 2)
    assert valid.tolist() == [[0, 0], [1, 0], [0, 0], [0, 0], [0, 0]]
    assert returns[1, 0] == pytest.approx(math.log(99.0 / 101.0), rel=1e-6)
    # a flat window: σ = 0 falls back to 1 as well, every valid return is 0 and nothing is NaN
    flat = np.array([5.0, 5.0, 5.0, 5.0, 7.0])
    returns, valid = future_return_table(flat, 0, 4, 1)
    assert valid[:, 0].tolist() == [1, 1, 1, 0, 0] and np.isfinite(returns).all() and not returns.any()


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bars=st.integers(3, 40), horizon=st.integers(1, 6), data=st.data())
def test_no_valid_entry_reads_a_close_at_or_after_the_windows_end(seed: int, bars: int, horizon: int, data) -> None:
    stop = data.draw(st.integers(2, bars - 1), label="stop")  # at least one bar after the window
    start = data.draw(st.integers(0, stop - 1), label="start")
    rng = np.random.default_rng(seed)
    close = random_close(rng, bars)
    returns, valid = future_return_table(close, start, stop, horizon)
    changed = close.copy()
    changed[stop:] *= np.exp(rng.normal(0.0, 1.0, bars - stop))  # the validation and test bars: anything else
    changed[:start] *= np.exp(rng.normal(0.0, 1.0, start))  # and the bars before the window
    after, after_valid = future_return_table(changed, start, stop, horizon)
    np.testing.assert_array_equal(after_valid, valid)
    np.testing.assert_array_equal(after, returns)


@pytest.mark.parametrize(("start", "stop", "horizon", "match"), [
    (-1, 5, 1, r"\[-1, 5\).*10 bars"), (0, 11, 1, r"\[0, 11\)"), (5, 5, 1, r"\[5, 5\)"), (6, 4, 1, r"\[6, 4\)"),
    (0, 10, 0, "horizon must be >= 1"), (0, 10, -2, "horizon must be >= 1"),
])
def test_a_window_outside_the_bars_or_no_horizon_is_refused(start: int, stop: int, horizon: int, match: str) -> None:
    close = np.linspace(1.0, 2.0, 10)
    with pytest.raises(ValueError, match=match):
        future_return_table(close, start, stop, horizon)


@pytest.mark.parametrize("close", [np.ones((10, 2)), np.float64(5.0)], ids=["2-d", "scalar"])
def test_a_close_that_is_not_one_dimensional_is_refused(close) -> None:
    with pytest.raises(ValueError, match="1-d series of prices"):
        future_return_table(close, 0, 5, 1)


def _component(name: str, task: AuxiliaryTask | None) -> LossComponent:
    return LossComponent(name, 0.25, lambda inputs: torch.zeros(()), "a loss", auxiliary=task)


def test_the_layout_lays_columns_end_to_end_in_component_order() -> None:
    components = [_component("plain", None), _component("a", AuxiliaryTask(1, 1)), _component("b", AuxiliaryTask(3, 5)),
                  _component("other", None), _component("c", AuxiliaryTask(2, 2))]
    layout = auxiliary_layout(components)
    assert dict(layout.columns) == {"a": (0, 1), "b": (1, 4), "c": (4, 6)}
    assert (layout.outputs, layout.horizon) == (6, 5)
    # order is the components', not the names'
    assert dict(auxiliary_layout(components[::-1]).columns) == {"c": (0, 2), "b": (2, 5), "a": (5, 6)}
    # without a task: no columns, no horizon
    empty = auxiliary_layout([_component("plain", None)])
    assert (dict(empty.columns), empty.outputs, empty.horizon) == ({}, 0, 0)


@pytest.mark.parametrize(("outputs", "horizon", "match"), [
    (0, 1, "outputs must be an int >= 1"), (-1, 3, "outputs must be an int >= 1"), (True, 1, "outputs"),
    (1.5, 1, "outputs"), (1, -1, "horizon must be an int >= 0"), (1, True, "horizon"), (1, 2.0, "horizon"),
])
def test_an_auxiliary_task_needs_whole_sizes(outputs, horizon, match: str) -> None:
    """At least one column; no future return (horizon 0) or some."""
    with pytest.raises(ValueError, match=match):
        AuxiliaryTask(outputs, horizon)


def test_tasks_of_horizon_zero_get_columns_and_no_future_returns() -> None:
    """A task trained on the learner's own targets asks for columns alone: with every task at 0 the layout's
    horizon is 0 (no table built, nothing gathered); beside a task that reads returns, the largest still wins."""
    own = [_component("a", AuxiliaryTask(3, 0)), _component("plain", None), _component("b", AuxiliaryTask(2, 0))]
    layout = auxiliary_layout(own)
    assert (dict(layout.columns), layout.outputs, layout.horizon) == ({"a": (0, 3), "b": (3, 5)}, 5, 0)
    mixed = auxiliary_layout([*own, _component("c", AuxiliaryTask(1, 4))])
    assert (mixed.outputs, mixed.horizon) == (6, 4)


# -- the replay ---------------------------------------------------------------------------------------------------
N_ENVS, H, N_BARS = 3, 4, 30


def replay_of(horizon: int = H, capacity: int = 90, dtype: torch.dtype = torch.float64) -> Replay:
    return Replay(ReplayConfig(capacity=capacity), obs_dim=2, n_envs=N_ENVS, n_step=1, device="cpu",
                  generator=torch.Generator().manual_seed(5), dtype=dtype, horizon=horizon)


def add_known_bars(replay: Replay, steps: int, seed: int = 1, unknown_every: int = 4) -> None:
    """Transitions whose obs[:, 0] is their stored bar (-1: stored with bars=None, every ``unknown_every``-th step)."""
    g = torch.Generator().manual_seed(seed)
    for step in range(steps):
        known = step % unknown_every != unknown_every - 1
        bars = torch.randint(0, N_BARS, (N_ENVS,), generator=g)
        obs = torch.stack([bars.double() if known else torch.full((N_ENVS,), -1.0),
                           torch.randn(N_ENVS, generator=g, dtype=torch.float64)], 1)
        replay.add(obs, torch.zeros(N_ENVS, len(Branch), dtype=torch.int64), torch.randn(N_ENVS, generator=g),
                   obs + 1.0, torch.zeros(N_ENVS), bars=bars if known else None)


def random_table(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    valid = (torch.rand(N_BARS, H, generator=g) < 0.7).float()
    return torch.randn(N_BARS, H, generator=g) * valid, valid


def assert_rows_of_their_bars(batch, returns: torch.Tensor, valid: torch.Tensor) -> tuple[int, int]:
    """Each sampled row is its stored bar's table row (zeros for an unknown bar); how many of each were drawn."""
    assert batch.future_returns.shape == batch.future_valid.shape == (batch.obs.shape[0], H)
    known = unknown = 0
    for i, bar in enumerate(batch.obs[:, 0].long().tolist()):
        if bar < 0:
            unknown += 1
            assert not batch.future_returns[i].any() and not batch.future_valid[i].any()
        else:
            known += 1
            assert torch.equal(batch.future_returns[i], returns[bar].double())
            assert torch.equal(batch.future_valid[i], valid[bar].double())
    return known, unknown


def test_the_replay_gathers_the_table_row_of_each_transitions_bar() -> None:
    replay = replay_of()
    add_known_bars(replay, 20)
    before = replay.sample(64, GAMMA)
    # no table yet: every future return masked
    assert before.future_returns.shape == before.future_valid.shape == (64, H)
    assert not before.future_returns.any() and not before.future_valid.any()
    returns, valid = random_table(7)
    replay.set_future_returns(returns, valid)
    known, unknown = assert_rows_of_their_bars(replay.sample(64, GAMMA), returns, valid)
    assert known > 0 and unknown > 0  # the draw holds both kinds


def test_the_first_table_is_the_replays_own_copy() -> None:
    """A float32 replay takes a float32 table without a conversion: still a copy, so the caller's tensor changing
    later does not leak in, and the next fold's copy never writes into the caller's tensor."""
    replay = replay_of(dtype=torch.float32)
    add_known_bars(replay, 20)
    returns, valid = random_table(7)
    replay.set_future_returns(returns, valid)
    kept = returns.clone()
    returns.add_(100.0)
    valid.zero_()
    assert torch.equal(replay.future_table, kept) and replay.future_mask.any()
    assert float(replay.sample(64, GAMMA).future_returns.abs().max()) < 100.0
    replay.set_future_returns(*random_table(8))
    assert torch.equal(returns, kept + 100.0)


def test_a_later_table_is_copied_into_the_first_ones_tensors() -> None:
    """Fixed addresses (a captured CUDA graph reads them) and the new fold's values from then on."""
    replay = replay_of()
    add_known_bars(replay, 20)
    replay.set_future_returns(*random_table(1))
    table, mask = replay.future_table, replay.future_mask
    addresses = (table.data_ptr(), mask.data_ptr())
    returns, valid = random_table(2)
    replay.set_future_returns(returns, valid)
    assert replay.future_table is table and replay.future_mask is mask
    assert (replay.future_table.data_ptr(), replay.future_mask.data_ptr()) == addresses
    assert_rows_of_their_bars(replay.sample(64, GAMMA), returns, valid)


@pytest.mark.parametrize(("returns_shape", "valid_shape"), [((N_BARS, H + 1), (N_BARS, H + 1)),
                                                             ((N_BARS, H), (N_BARS - 1, H)), ((N_BARS,), (N_BARS,))])
def test_a_table_of_the_wrong_shape_is_refused(returns_shape, valid_shape) -> None:
    with pytest.raises(ValueError, match=rf"\[bars, {H}\]"):
        replay_of().set_future_returns(torch.zeros(returns_shape), torch.zeros(valid_shape))


def test_without_a_horizon_the_replay_is_what_it_was() -> None:
    replay = replay_of(horizon=0)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        obs = torch.randn(N_ENVS, 2, generator=g)
        replay.add(obs, torch.zeros(N_ENVS, len(Branch), dtype=torch.int64), torch.randn(N_ENVS, generator=g),
                   obs, torch.zeros(N_ENVS))
    batch = replay.sample(8, GAMMA)
    assert batch.future_returns is None and batch.future_valid is None
    assert "bars" not in dict(replay.named_buffers())  # the replay's saved state is unchanged
    assert "bars" in dict(replay_of().named_buffers())


# -- the network -------------------------------------------------------------------------------------------------
def test_the_network_without_the_head_has_exactly_its_old_parameters(kit) -> None:
    config = kit.small_config()
    torch.manual_seed(0)
    plain = BranchingNetwork(kit.obs_dim, config)
    torch.manual_seed(0)
    zero = BranchingNetwork(kit.obs_dim, config, auxiliary_outputs=0)
    torch.manual_seed(0)
    headed = BranchingNetwork(kit.obs_dim, config, auxiliary_outputs=4)
    names = [name for name, _ in plain.named_parameters()]
    assert [name for name, _ in zero.named_parameters()] == names
    assert zero.auxiliary_out is None and zero.auxiliary_hidden is None
    # the head is built last: every other parameter is where it was and drew the same initial values
    headed_params = dict(headed.named_parameters())
    assert list(headed_params)[:len(names)] == names
    assert list(headed_params)[len(names):] == ["auxiliary_hidden.weight", "auxiliary_hidden.bias",
                                                "auxiliary_out.weight", "auxiliary_out.bias"]
    for name, parameter in plain.named_parameters():
        assert torch.equal(headed_params[name], parameter), name


def test_the_heads_output_is_batch_by_outputs_and_only_when_asked(kit) -> None:
    config = kit.small_config()
    torch.manual_seed(1)
    network = BranchingNetwork(kit.obs_dim, config, auxiliary_outputs=5).double()
    obs = torch.randn(7, kit.obs_dim, dtype=torch.float64)
    support = torch.linspace(-1, 1, config.n_atoms, dtype=torch.float64).expand(network.n_branches, -1)
    out = network(obs, support, with_auxiliary=True)
    assert out.auxiliary.shape == (7, 5)
    # it reads the trunk's features: the small MLP on them
    h = network.features(obs)
    expected = network.auxiliary_out(torch.relu(network.auxiliary_hidden(h)))
    torch.testing.assert_close(out.auxiliary, expected, rtol=0, atol=0)
    assert network(obs, support).auxiliary is None  # acting and targets never compute it
    # the rest of the output does not depend on asking for it
    torch.testing.assert_close(network(obs, support).q, out.q, rtol=0, atol=0)
    plain = BranchingNetwork(kit.obs_dim, config).double()
    assert plain(obs, support, with_auxiliary=True).auxiliary is None


# -- the learner and LossInputs.auxiliary -------------------------------------------------------------------------
def toy_plugin() -> types.ModuleType:
    """A loss plugin with two auxiliary tasks: 2 columns and 3 bars of future returns, then 1 column and 1 bar."""
    module = types.ModuleType("toy_auxiliary")

    def loss(name):
        return lambda inputs: inputs.batch_mean((inputs.auxiliary(name) ** 2).sum(-1))

    @hookimpl
    def foxhunt_loss_components(config):
        return [LossComponent(TOY, 0.05, loss(TOY), "a toy auxiliary task", auxiliary=TOY_TASK),
                LossComponent(TOY_B, 0.05, loss(TOY_B), "another", auxiliary=AuxiliaryTask(outputs=1, horizon=1))]

    module.foxhunt_loss_components = foxhunt_loss_components
    return module


def test_a_learner_whose_tasks_read_no_future_returns_builds_and_gathers_none(make_learner) -> None:
    """Every task at horizon 0: the head is built, the replay keeps no bar index, no table is built at a fold,
    and each sampled batch has no future returns; the update runs."""
    module = types.ModuleType("own_targets")

    @hookimpl
    def foxhunt_loss_components(config):
        return [LossComponent(TOY, 0.1, lambda inputs: inputs.batch_mean((inputs.auxiliary(TOY) ** 2).sum(-1)),
                              "a task on the learner's own values", auxiliary=AuxiliaryTask(outputs=2, horizon=0))]

    module.foxhunt_loss_components = foxhunt_loss_components
    learner = make_learner(extra=[(module, "own")], budgets={"c51": 0.3, TOY: 0.1})
    assert learner.future_horizon == 0 and learner.network.auxiliary_out.out_features == 2
    assert "bars" not in dict(learner.replay.named_buffers())
    learner.use_future_returns(random_close(np.random.default_rng(1), 40), 5, 30)
    assert learner.replay.future_table is None
    batch = learner.sample(8)
    assert batch.future_returns is None and batch.future_valid is None
    assert learner.loss_inputs(batch).auxiliary(TOY).shape == (8, 2)
    learner.step(8)


def toy_learner(make_learner, **kw):
    return make_learner(extra=[(toy_plugin(), "toy")], budgets={"c51": 0.3, TOY: 0.05, TOY_B: 0.05}, **kw)


def test_a_component_with_a_task_gets_its_columns_and_an_unknown_one_a_key_error(make_learner) -> None:
    learner = toy_learner(make_learner, dtype=torch.float64)
    assert dict(learner.auxiliary.columns) == {TOY: (0, 2), TOY_B: (2, 3)} and learner.future_horizon == 3
    assert learner.network.auxiliary_out.out_features == 3
    inputs = learner.loss_inputs(learner.sample(16))
    assert inputs.online.auxiliary.shape == (16, 3)
    assert torch.equal(inputs.auxiliary(TOY), inputs.online.auxiliary[:, 0:2])
    assert torch.equal(inputs.auxiliary(TOY_B), inputs.online.auxiliary[:, 2:3])
    assert inputs.batch.future_returns.shape == (16, 3)  # the largest horizon asked for
    with pytest.raises(KeyError, match=r"'c51'.*\['toy_aux', 'toy_b'\]"):
        inputs.auxiliary("c51")
    with pytest.raises(KeyError, match="'nope'"):
        inputs.auxiliary("nope")
    # a learner without any task: the error says there is none
    plain = make_learner(dtype=torch.float64)
    with pytest.raises(KeyError, match="none"):
        plain.loss_inputs(plain.sample(8)).auxiliary(TOY)


def test_the_learner_hands_its_replay_the_folds_table(make_learner) -> None:
    learner = toy_learner(make_learner, fill=10)
    close = random_close(np.random.default_rng(8), 40)
    learner.use_future_returns(close, 5, 30)
    returns, valid = future_return_table(close, 5, 30, 3)
    assert torch.equal(learner.replay.future_table, torch.from_numpy(returns))
    assert torch.equal(learner.replay.future_mask, torch.from_numpy(valid))
    learner.step(8)  # an update runs with the head and its targets
    # a learner without a task has no head, no horizon, and ignores the call
    plain = make_learner(fill=0)
    assert plain.future_horizon == 0 and plain.network.auxiliary_out is None
    plain.use_future_returns(close, 5, 30)
    assert plain.replay.future_table is None
