"""Prioritized replay oracles: any capacity, uniform at zero priority, frequencies follow priorities,
weights normalised by their maximum, priorities from raw TD error, n-step returns against a brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from foxhunt.actions import Branch
from foxhunt.learner import Replay, ReplayConfig
from foxhunt.learner.replay import spread_max


def make_replay(capacity: int, n_envs: int, n_step: int = 3, seed: int = 0, **kw: object) -> Replay:
    config = ReplayConfig(capacity=capacity, **kw)
    return Replay(config, obs_dim=2, n_envs=n_envs, n_step=n_step, device="cpu", generator=torch.Generator().manual_seed(seed))


def add_steps(replay: Replay, steps: int, seed: int = 1, done_rate: float = 0.0) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(seed)
    history = []
    for t in range(steps):
        e = replay.n_envs
        obs = torch.full((e, 2), float(t)) + torch.arange(e)[:, None] * 1000
        actions = torch.zeros(e, len(Branch), dtype=torch.long)
        rewards = torch.randn(e, generator=g)
        dones = (torch.rand(e, generator=g) < done_rate).float()
        replay.add(obs, actions, rewards, obs + 0.5, dones)
        history.append((obs, rewards, obs + 0.5, dones))
    return history


def chi_square_critical(dof: int, z: float = 3.29) -> float:
    """Wilson-Hilferty upper quantile of χ²(dof); z = 3.29 is p ≈ 0.0005 (the seeds are fixed)."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


@pytest.mark.parametrize(("capacity", "n_envs"), [(21, 3), (1000, 7), (97, 1), (130, 5)])
def test_any_capacity_samples_only_filled_slots(capacity: int, n_envs: int) -> None:
    replay = make_replay(capacity, n_envs)
    rows = capacity // n_envs
    add_steps(replay, rows // 2)
    indices, weights = replay.sample_indices(4096)
    assert int(indices.max()) < (rows // 2) * n_envs
    assert int(indices.min()) >= 0
    add_steps(replay, rows + 3)  # wrap around: every slot filled, the oldest overwritten
    indices, _ = replay.sample_indices(4096)
    assert int(indices.max()) < rows * n_envs
    counts = torch.bincount(indices, minlength=rows * n_envs)
    assert (counts > 0).sum() > 0.9 * rows * n_envs


@pytest.mark.parametrize(("capacity", "n_envs"), [(21, 3), (131, 1)])
def test_zero_priorities_sample_uniformly(capacity: int, n_envs: int) -> None:
    replay = make_replay(capacity, n_envs)
    add_steps(replay, capacity)
    slots = replay.slots
    replay.update_priorities(torch.arange(slots), torch.zeros(slots))  # zero TD error everywhere
    draws = 200 * slots
    indices, weights = replay.sample_indices(draws)
    counts = torch.bincount(indices, minlength=slots).double()
    expected = draws / slots
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < chi_square_critical(slots - 1)
    torch.testing.assert_close(weights, torch.ones_like(weights))
    # exact zeros (no eps) also fall back to uniform over the filled slots
    replay.priorities.zero_()
    counts = torch.bincount(replay.sample_indices(draws)[0], minlength=slots).double()
    assert float(((counts - expected) ** 2 / expected).sum()) < chi_square_critical(slots - 1)


@pytest.mark.parametrize("alpha", [1.0, 0.6])
def test_sampling_frequencies_match_priorities(alpha: float) -> None:
    replay = make_replay(30, 3, alpha=alpha, alpha_final=alpha, seed=5)
    add_steps(replay, 10)
    slots = replay.slots
    g = torch.Generator().manual_seed(9)
    td = torch.rand(slots, generator=g) * 3
    replay.update_priorities(torch.arange(slots), td)
    mass = (td.double() + replay.config.priority_eps) ** alpha
    probs = mass / mass.sum()
    draws = 60_000
    counts = torch.bincount(replay.sample_indices(draws)[0], minlength=slots).double()
    expected = draws * probs
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < chi_square_critical(slots - 1)


def test_importance_weights_normalised_by_their_maximum() -> None:
    replay = make_replay(40, 4, beta=0.7, beta_final=0.7)
    add_steps(replay, 6)  # 24 of 40 slots filled
    td = torch.linspace(0.1, 5.0, replay.slots)
    replay.update_priorities(torch.arange(replay.slots), td)
    indices, weights = replay.sample_indices(256)
    n_filled = 6 * 4
    mass = replay.sampling_mass()
    probs = mass[indices] / mass.sum()
    raw = (n_filled * probs) ** -0.7
    torch.testing.assert_close(weights.double(), raw / raw.max(), rtol=1e-6, atol=0)
    assert float(weights.max()) == 1.0


def test_priorities_come_from_raw_td_error_and_new_slots_get_the_max() -> None:
    replay = make_replay(30, 3, priority_eps=1e-3)
    add_steps(replay, 4)
    indices = torch.tensor([0, 4, 7])
    replay.update_priorities(indices, torch.tensor([-2.0, 0.5, 0.0]))
    flat = replay.priorities.view(-1)
    torch.testing.assert_close(flat[indices], torch.tensor([2.001, 0.501, 0.001]))
    add_steps(replay, 1)
    torch.testing.assert_close(replay.priorities[4], torch.full((3,), 2.001))


def test_a_slot_drawn_twice_keeps_the_largest_priority_whatever_the_order() -> None:
    """The mirror gives a slot's two copies different TD errors; the write must not depend on their order."""
    replay = make_replay(30, 3, priority_eps=1e-3)
    add_steps(replay, 4)
    flat = replay.priorities.view(-1)
    untouched = flat[5].clone()
    for order in ([0.5, -3.0, 1.0], [1.0, -3.0, 0.5], [-3.0, 0.5, 1.0]):
        replay.update_priorities(torch.tensor([7, 7, 7]), torch.tensor(order))
        assert float(flat[7]) == pytest.approx(3.001)
        replay.update_priorities(torch.tensor([7]), torch.tensor([0.0]))  # a single draw sets it, even lower
        assert float(flat[7]) == pytest.approx(0.001)
    assert torch.equal(flat[5], untouched)


def test_alpha_and_beta_anneal_linearly_and_reset() -> None:
    replay = make_replay(30, 3, alpha=0.5, alpha_final=0.7, beta=0.4, beta_final=1.0, anneal_steps=10)
    for _ in range(5):
        replay.advance()
    assert float(replay.beta) == pytest.approx(0.7)
    assert float(replay.alpha) == pytest.approx(0.6)
    for _ in range(20):
        replay.advance()
    assert float(replay.beta) == pytest.approx(1.0)
    add_steps(replay, 3)
    replay.reset()
    assert float(replay.beta) == pytest.approx(0.4)
    assert int(replay.written) == 0
    assert float(replay.sampling_mass().sum()) == 0.0


@pytest.mark.parametrize(("n_step", "n_step_mix"), [(1, 0), (3, 0), (5, 0), (5, 2), (7, 1)])
def test_n_step_returns_match_brute_force(n_step: int, n_step_mix: int) -> None:
    n_envs, capacity = 3, 3 * 11
    replay = Replay(ReplayConfig(capacity=capacity, prioritized=False), obs_dim=2, n_envs=n_envs, n_step=n_step,
                    device="cpu", generator=torch.Generator().manual_seed(0), n_step_mix=n_step_mix)
    history = add_steps(replay, 17, done_rate=0.25)  # wraps the 11-row ring
    gamma = torch.tensor([0.5, 0.9, 1.0, 0.97], dtype=torch.float64)
    uniforms = replay.uniforms(256)
    batch = replay.sample_at(uniforms, gamma.float())
    horizons = replay.horizons(uniforms)
    assert set(horizons.tolist()) == ({n_step, n_step_mix} if n_step_mix else {n_step})
    rows = replay.rows
    first = 17 - rows  # oldest step still stored
    for k in range(256):
        index = int(batch.indices[k])
        row, env = divmod(index, n_envs)
        step = next(s for s in range(first, 17) if s % rows == row)
        ret = torch.zeros(4, dtype=torch.float64)
        m, terminal = 0, 0.0
        for j in range(int(horizons[k])):
            if step + j >= 17:
                break
            _, rewards, next_obs, dones = history[step + j]
            ret += gamma**j * float(rewards[env])
            m += 1
            terminal = float(dones[env])
            bootstrap = next_obs[env]
            if terminal:
                break
        np.testing.assert_allclose(batch.returns[k].numpy(), ret.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batch.discounts[k].numpy(), (gamma**m * (1 - terminal)).numpy(), rtol=1e-5)
        torch.testing.assert_close(batch.next_obs[k], bootstrap)
        torch.testing.assert_close(batch.obs[k], history[step][0][env])


def test_mixed_horizons_split_the_draws_evenly_wherever_they_land() -> None:
    # [learner] n_step_mix: the short horizon is drawn with even odds, independently of the slot the draw picked
    # (the stratified draw places a sample by its leading bits; the horizon reads the bits below them)
    replay = Replay(ReplayConfig(capacity=128), obs_dim=2, n_envs=4, n_step=16, device="cpu",
                    generator=torch.Generator().manual_seed(5), n_step_mix=3)
    draws = 40_000
    uniforms = replay.uniforms(draws)
    short = (replay.horizons(uniforms) == 3).double()
    bound = 4 * math.sqrt(0.25 / (draws / 4))  # four standard errors of a quarter's share
    for quarter in torch.arange(draws).reshape(4, -1):  # low to high draws: every part of the buffer
        low_to_high = short[torch.argsort(uniforms)][quarter]
        assert abs(float(low_to_high.mean()) - 0.5) < bound
    assert set(replay.horizons(uniforms).unique().tolist()) == {3, 16}


def test_mixed_horizon_must_be_shorter_than_n_step() -> None:
    with pytest.raises(ValueError, match="n_step_mix"):
        Replay(ReplayConfig(capacity=64), obs_dim=2, n_envs=4, n_step=3, device="cpu",
               generator=torch.Generator().manual_seed(0), n_step_mix=3)


def test_capacity_too_small_for_n_step_is_rejected() -> None:
    with pytest.raises(ValueError, match="n_step"):
        make_replay(6, 3, n_step=3)


@pytest.mark.parametrize("n_step", [1, 3])
def test_split_rewards_give_each_branch_its_part_of_the_n_step_return(n_step: int) -> None:
    # [learner] reward_split: order type and urgency sum the rewards' execution parts, direction and magnitude
    # the rest, each with its own discount; without the split every branch sums the whole reward.
    n_envs, capacity, steps = 2, 2 * 9, 13
    replay = Replay(ReplayConfig(capacity=capacity, prioritized=False), obs_dim=2, n_envs=n_envs, n_step=n_step,
                    device="cpu", generator=torch.Generator().manual_seed(3), reward_split=True)
    g = torch.Generator().manual_seed(4)
    rewards, executions, dones = [], [], []
    for t in range(steps):
        obs = torch.full((n_envs, 2), float(t))
        rewards.append(torch.randn(n_envs, generator=g))
        executions.append(torch.randn(n_envs, generator=g))
        dones.append((torch.rand(n_envs, generator=g) < 0.2).float())
        replay.add(obs, torch.zeros(n_envs, len(Branch), dtype=torch.long), rewards[-1], obs, dones[-1],
                   executions=executions[-1])
    gamma = torch.tensor([0.5, 0.9, 0.8, 0.97], dtype=torch.float64)
    batch = replay.sample(128, gamma.float())
    first = steps - replay.rows
    for k in range(128):
        row, env = divmod(int(batch.indices[k]), n_envs)
        step = next(s for s in range(first, steps) if s % replay.rows == row)
        expected = np.zeros(len(Branch))
        for j in range(n_step):
            if step + j >= steps:
                break
            reward, execution = float(rewards[step + j][env]), float(executions[step + j][env])
            for branch in Branch:
                part = execution if branch in (Branch.ORDER_TYPE, Branch.URGENCY) else reward - execution
                expected[branch] += float(gamma[branch]) ** j * part
            if dones[step + j][env]:
                break
        np.testing.assert_allclose(batch.returns[k].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_a_split_replay_refuses_a_step_without_its_execution_parts() -> None:
    replay = Replay(ReplayConfig(capacity=8), obs_dim=2, n_envs=2, n_step=1, device="cpu",
                    generator=torch.Generator().manual_seed(0), reward_split=True)
    with pytest.raises(ValueError, match="execution part"):
        replay.add(torch.zeros(2, 2), torch.zeros(2, len(Branch), dtype=torch.long), torch.zeros(2), torch.zeros(2, 2),
                   torch.zeros(2))


@pytest.mark.parametrize("length", [1, 31, 32, 33, 64, 8192, 8200])
def test_the_spread_max_is_the_max_exactly(length: int) -> None:
    """The importance weights' normaliser, taken as a max of row maxima where the length allows."""
    draws = torch.rand(length, generator=torch.Generator().manual_seed(length), dtype=torch.float64)
    weights = (length * draws).pow(-0.4)  # shaped like the sampler's (N · P)^-β
    assert spread_max(weights).item() == weights.max().item()
    assert spread_max(-weights).item() == (-weights).max().item()
