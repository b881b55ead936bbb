"""The Learner as a whole: determinism, checkpoints, state registry, ISV reads, acting, schedules."""

from __future__ import annotations

import math

import pytest
import torch

from foxhunt.actions import Branch
from foxhunt.errors import CheckpointError, LayoutError
from foxhunt.hookspecs import hookimpl
from foxhunt.learner import LearnerConfig
from foxhunt.learner.declarations import LEARNER_STATE
from foxhunt.learner.functional import q_statistics
from foxhunt.learner.optim import LRSchedule
from foxhunt.learner.slots import SLOT_WIDTHS
from foxhunt.state import ResetCategory


def test_same_seed_same_data_gives_bit_identical_parameters(make_learner) -> None:
    runs = []
    for _ in range(2):
        learner = make_learner(seed=3)
        for _ in range(8):
            learner.step(48)
        runs.append(learner.state_dict())
    assert runs[0].keys() == runs[1].keys()
    for name in runs[0]:
        assert torch.equal(runs[0][name], runs[1][name]), name
    other = make_learner(seed=4)
    for _ in range(8):
        other.step(48)
    assert not torch.equal(other.state_dict()["network.trunk.0.weight"], runs[0]["network.trunk.0.weight"])


def test_state_dict_round_trip_continues_identically(make_learner) -> None:
    a = make_learner(seed=1)
    for _ in range(3):
        a.step(32)
    state = a.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    b = make_learner(seed=99, fill=0)
    b.load_state_dict(state)
    for _ in range(3):
        a.step(32)
        b.step(32)
    for name, tensor in a.state_dict().items():
        assert torch.equal(tensor, b.state_dict()[name]), name


def test_state_dict_from_another_shape_is_refused(make_learner) -> None:
    state = make_learner(fill=0).state_dict()
    other = make_learner(hidden=(16, 16, 16), fill=0)
    with pytest.raises(CheckpointError, match="missing"):
        other.load_state_dict(state)


def test_every_piece_of_state_is_registered_and_fold_reset_works(make_learner, kit) -> None:
    learner = make_learner()
    registry = learner.registries.state
    assert registry.unattached() == []
    categories = {entry.name: entry.category for entry in registry.entries()}
    assert categories["learner.replay"] is ResetCategory.FOLD_RESET
    assert categories["learner.optimizer"] is ResetCategory.FOLD_RESET
    assert categories["learner.target_network"] is ResetCategory.TRAINING_PERSIST
    assert {spec.name for spec in LEARNER_STATE} <= set(categories)
    for _ in range(3):
        learner.step(32)
    weights = learner.network.trunk[0].weight.detach().clone()
    reset = registry.fold_boundary()
    assert {"learner.optimizer", "learner.replay", "learner.schedule"} <= set(reset)
    assert int(learner.replay.written) == 0
    for state in learner.optimizer.state.values():
        assert all(float(t.abs().sum()) == 0.0 for t in state.values())
    assert float(learner.schedule.step) == 0.0
    assert torch.equal(learner.network.trunk[0].weight, weights)  # training-persist: untouched
    kit.fill_replay(learner, 20, seed=5)
    learner.step(32)  # trains on after the reset


class AdaptiveSlots:
    """A test plugin that owns every slot the learner reads (what the adaptive plugins will declare)."""

    def __init__(self, widths: dict[str, int]) -> None:
        self.widths = widths

    @hookimpl
    def foxhunt_declare(self, registrar) -> None:
        for name, width in self.widths.items():
            registrar.slot(name, width=width, init=1.0 if name != "tau.value" else 0.01)
            registrar.state(name, ResetCategory.FOLD_RESET)


def test_learner_reads_its_slots_from_the_isv(make_learner) -> None:
    learner = make_learner(popart=False, extra=[(AdaptiveSlots(SLOT_WIDTHS), "adaptive")])
    assert set(learner.reads.sources.values()) == {"isv"}
    isv = learner.isv
    isv.write("support.center", torch.tensor([0.0, 1.0, -2.0, 5.0]))
    isv.write("support.half_width", torch.tensor([1.0, 2.0, 3.0, 4.0]))
    support = learner.support()
    torch.testing.assert_close(support[:, 0], torch.tensor([-1.0, -1.0, -5.0, 1.0]))
    torch.testing.assert_close(support[:, -1], torch.tensor([1.0, 3.0, 1.0, 9.0]))
    # τ = 1 copies the online net into the target; τ = 0 leaves the target alone (PopArt off: it rescales)
    isv.write("tau.value", 1.0)
    learner.step(32)
    for t, o in zip(learner.target.parameters(), learner.network.parameters(), strict=True):
        torch.testing.assert_close(t, o, rtol=1e-6, atol=1e-7)  # t + (o - t) rounds
    isv.write("tau.value", 0.0)
    before = [t.clone() for t in learner.target.parameters()]
    learner.step(32)
    for b, t in zip(before, learner.target.parameters(), strict=True):
        assert torch.equal(b, t)
    # γ from the ISV reaches the n-step discounts
    isv.write("gamma.branch", torch.tensor([0.5, 0.6, 0.7, 0.8]))
    batch = learner.sample(64)
    alive = batch.discounts[:, Branch.DIRECTION] > 0
    ratio = torch.log(batch.discounts[alive]) / torch.log(torch.tensor([0.5, 0.6, 0.7, 0.8]))
    torch.testing.assert_close(ratio, ratio[:, :1].expand_as(ratio))  # same m in every branch


def test_a_slot_of_the_wrong_width_is_refused(make_learner) -> None:
    with pytest.raises(LayoutError, match=r"gamma.branch.*width=4"):
        make_learner(extra=[(AdaptiveSlots({"gamma.branch": 1}), "adaptive")])


def test_fallbacks_come_from_the_config(make_learner) -> None:
    learner = make_learner(v_min=-3.0, v_max=5.0, tau=0.25)
    assert set(learner.reads.sources.values()) == {"config"}
    support = learner.support()
    torch.testing.assert_close(support[:, 0], torch.full((len(Branch),), -3.0))
    torch.testing.assert_close(support[:, -1], torch.full((len(Branch),), 5.0))
    assert float(learner.reads.tau) == 0.25


def test_act_values_shape_and_padded_actions(make_learner, kit) -> None:
    learner = make_learner()
    values = learner.act_values(torch.randn(5, kit.obs_dim))
    assert values.shape == (5, len(Branch), learner.network.n_actions)
    mask = learner.network.action_mask
    assert torch.isfinite(values[:, mask]).all()
    assert torch.isneginf(values[:, ~mask]).all()


@pytest.mark.parametrize("mult", [1, 2])
def test_cosine_schedule_with_warm_restarts(mult: int) -> None:
    config = LearnerConfig(lr=1.0, lr_min=0.1, lr_schedule="cosine", restart_period=4, restart_mult=mult)
    schedule = LRSchedule(config, "cpu")
    seen = []
    for _ in range(14):
        schedule.advance()
        seen.append(float(schedule.lr))
    starts, lengths, start, length = [], [], 0, 4
    while start < 20:
        starts.append(start)
        lengths.append(length)
        start += length
        length *= mult
    for step, lr in enumerate(seen, start=1):
        cycle = max(i for i, s in enumerate(starts) if s <= step)
        t_cur = step - starts[cycle]
        expected = 0.1 + 0.45 * (1 + math.cos(math.pi * t_cur / lengths[cycle]))
        assert lr == pytest.approx(expected, abs=1e-6), step
    schedule.reset()
    assert float(schedule.lr) == 1.0


def test_signals_for_the_adaptive_kernels_are_written_in_place(make_learner) -> None:
    learner = make_learner(dtype=torch.float64)
    signals = learner.signals
    addresses = {name: t.data_ptr() for name, t in signals.items()}
    learner.step(32)
    assert {name: t.data_ptr() for name, t in signals.items()} == addresses
    torch.testing.assert_close(signals["learner.loss"], learner.loss_values.sum().float().reshape(1))
    own = [p.grad.reshape(p.shape[0], -1).pow(2).sum(-1) for p in learner.network.branch_parameters()]
    torch.testing.assert_close(signals["learner.branch_grad_norm"], torch.stack(own).sum(0).sqrt().float())
    assert (signals["learner.branch_grad_norm"] > 0).all()
    q = learner.loss_inputs(learner.sample(16)).online.q.detach()
    q_mean, q_std, q_gap, greedy_share = q_statistics(q, learner.network.action_mask, learner.network.n_valid)
    greedy = q.max(-1).values
    torch.testing.assert_close(q_mean, greedy.mean(0))
    torch.testing.assert_close(q_std, greedy.std(0, unbiased=False))
    for branch in Branch:
        valid = q[:, branch, learner.network.action_mask[branch]]
        torch.testing.assert_close(q_gap[branch], (valid.max(-1).values - valid.mean(-1)).mean())
        counts = torch.bincount(valid.argmax(-1), minlength=valid.shape[-1])
        torch.testing.assert_close(greedy_share[branch], counts.max().to(q.dtype) / q.shape[0])
    assert signals["learner.component_grad_norm"] is learner.gradients.component_norms


def test_target_atoms_are_sorted_for_the_sorted_projection(make_learner) -> None:
    learner = make_learner()
    for _ in range(2):
        learner.step(32)
    atoms = learner.loss_inputs(learner.sample(64)).target_atoms
    assert (atoms[..., 1:] >= atoms[..., :-1]).all()
