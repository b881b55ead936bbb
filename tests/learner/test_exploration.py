"""Per-branch exploration: greedy limits, fresh counter-based draws each call, same seed same draws."""

from __future__ import annotations

import torch

from foxhunt.actions import Branch, branch_sizes
from foxhunt.learner.exploration import BranchExplorer

N = 4096


def q_values(seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn((N, size), generator=generator) for size in branch_sizes()]


def test_epsilon_zero_is_greedy_and_one_is_uniform() -> None:
    explorer = BranchExplorer(N, seed=1)
    q = q_values()
    greedy = torch.stack([branch.argmax(dim=-1) for branch in q], dim=-1)
    assert torch.equal(explorer.epsilon_greedy(q, 0.0), greedy)
    uniform = explorer.epsilon_greedy(q, 1.0)
    for b in Branch:
        counts = torch.bincount(uniform[:, b], minlength=branch_sizes()[b]).double() / N
        assert torch.allclose(counts, torch.full_like(counts, 1.0 / branch_sizes()[b]), atol=0.03)


def test_epsilon_per_branch_tensor() -> None:
    explorer = BranchExplorer(N, seed=2)
    q = q_values()
    epsilon = torch.tensor([0.0, 1.0, 0.0, 0.0])
    actions = explorer.epsilon_greedy(q, epsilon)
    assert torch.equal(actions[:, Branch.DIRECTION], q[Branch.DIRECTION].argmax(dim=-1))
    assert not torch.equal(actions[:, Branch.MAGNITUDE], q[Branch.MAGNITUDE].argmax(dim=-1))


def test_draws_change_every_call_and_repeat_with_the_seed() -> None:
    first, second = BranchExplorer(N, seed=3), BranchExplorer(N, seed=3)
    q = q_values()
    a1, a2 = first.epsilon_greedy(q, 0.5), first.epsilon_greedy(q, 0.5)
    assert not torch.equal(a1, a2)  # same Python call, new device counter value
    assert int(first.counter.item()) == 2
    assert torch.equal(second.epsilon_greedy(q, 0.5), a1)
    assert not torch.equal(BranchExplorer(N, seed=4).epsilon_greedy(q, 0.5), a1)


def test_boltzmann_temperature_limits() -> None:
    explorer = BranchExplorer(N, seed=5)
    q = q_values()
    cold = explorer.boltzmann(q, 1e-4)
    assert torch.equal(cold, torch.stack([branch.argmax(dim=-1) for branch in q], dim=-1))
    hot = explorer.boltzmann(q, 1e4)
    counts = torch.bincount(hot[:, Branch.DIRECTION], minlength=4).double() / N
    assert torch.allclose(counts, torch.full_like(counts, 0.25), atol=0.03)
    # Boltzmann frequencies follow softmax(Q / T) for one fixed row of Q.
    row = [torch.tensor([[0.0, 1.0, 2.0, 0.5]]).expand(N, 4)] + [branch for branch in q[1:]]
    drawn = explorer.boltzmann(row, 1.0)[:, Branch.DIRECTION]
    expected = torch.softmax(torch.tensor([0.0, 1.0, 2.0, 0.5]), dim=0).double()
    assert torch.allclose(torch.bincount(drawn, minlength=4).double() / N, expected, atol=0.03)


def test_a_restored_counter_continues_the_draws() -> None:
    q = [torch.zeros(6, size) for size in branch_sizes()]
    original, restored = BranchExplorer(6, seed=11), BranchExplorer(6, seed=11)
    for _ in range(5):
        original.epsilon_greedy(q, 0.5)
    restored.load_state_dict({name: t.clone() for name, t in original.state_dict().items()})
    assert torch.equal(restored.epsilon_greedy(q, 0.5), original.epsilon_greedy(q, 0.5))
    assert torch.equal(restored.boltzmann(q, 1.0), original.boltzmann(q, 1.0))
    # the counter is what carried the draws on: a fresh explorer of the same seed draws otherwise
    assert not torch.equal(BranchExplorer(6, seed=11).epsilon_greedy(q, 0.5), restored.epsilon_greedy(q, 0.5))


def test_reseed_gives_the_streams_of_that_seed_and_keeps_the_counter() -> None:
    """A multi-device rank re-keys its explorer: the same actions as an explorer built with that seed."""
    q = [torch.zeros(8, size) for size in branch_sizes()]
    fresh, reseeded, original = BranchExplorer(8, 11), BranchExplorer(8, 3), BranchExplorer(8, 3)
    reseeded.reseed(11)
    assert torch.equal(fresh.epsilon_greedy(q, 1.0), reseeded.epsilon_greedy(q, 1.0))
    assert int(reseeded.counter) == 1
    assert not torch.equal(original.epsilon_greedy(q, 1.0), BranchExplorer(8, 11).epsilon_greedy(q, 1.0))
