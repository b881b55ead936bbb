"""The Learner as a whole: determinism, checkpoints, state registry, ISV reads, acting, schedules."""

from __future__ import annotations

import math

import pytest
import torch

from foxhunt.actions import Branch
from foxhunt.errors import CheckpointError, LayoutError
from foxhunt.plugin.spec import hookimpl
from foxhunt.learner import LearnerConfig
from foxhunt.learner.declarations import LEARNER_STATE
from foxhunt.learner.functional import q_statistics
from foxhunt.learner.optim import LRSchedule
from foxhunt.learner.slots import SLOT_WIDTHS
from foxhunt.state import ResetCategory
from tests.learner_builders import assert_resumes_identically


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
    assert_resumes_identically(a, make_learner(seed=99, fill=0))


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


# -- atoms centred on a state-value head (a component's CentredSupport; the IQL value head asks for one) ------------
IQL_BUDGETS = {"c51": 0.3, "iql": 0.1}


def centred_learner(make_learner, *, iql_settings: dict | None = None, **changes):
    from foxhunt_plugins.losses import iql

    settings = {"iql": {"enabled": True, **(iql_settings or {})}}
    return make_learner(extra=[(iql, "iql")], settings=settings, budgets=IQL_BUDGETS, **changes)


def test_a_learner_without_a_centring_component_has_no_head_and_shares_its_support(make_learner) -> None:
    learner = make_learner()
    assert learner.centring is None and learner.network.state_value_out is None
    assert torch.equal(learner.update_support(), learner.support())
    assert learner.loss_inputs(learner.sample(8)).support.shape == learner.support().shape  # [Branch, N]


def test_two_components_asking_for_centred_atoms_are_refused() -> None:
    from foxhunt.errors import ConfigError
    from foxhunt.learner.learner import centred_support_request
    from foxhunt.plugin.records import CentredSupport, LossComponent

    def component(name: str) -> LossComponent:
        return LossComponent(name, 0.5, lambda inputs: torch.zeros(()), "a loss", reads=("x.floor",),
                             centred_support=CentredSupport(2, lambda v: v.mean(-1), "x.floor"))

    assert centred_support_request([component("a")]) is not None
    with pytest.raises(ConfigError, match="'a', 'b' each ask for atoms centred"):
        centred_support_request([component("a"), component("b")])


@pytest.mark.parametrize(("v_range", "floor", "width"), [((-10.0, 10.0), 1.0, 10.0), ((-0.5, 0.5), 1.0, 1.0),
                                                         ((-10.0, 10.0), 25.0, 25.0)])
def test_the_update_support_is_the_offsets_with_the_floor_under_the_half_width(make_learner, v_range, floor, width) -> None:
    learner = centred_learner(make_learner, iql_settings={"support_floor": floor}, v_min=v_range[0], v_max=v_range[1])
    expected = torch.full((len(Branch), 1), width) * torch.linspace(-1.0, 1.0, learner.config.n_atoms)
    torch.testing.assert_close(learner.update_support(), expected, rtol=0, atol=1e-6)
    assert torch.equal(learner.support_floor, torch.full((len(Branch),), floor))  # a live view of the ISV slot
    learner.isv.write("iql.support_floor", [50.0] * len(Branch))
    assert float(learner.update_support().max()) == 50.0  # read live, not copied


def test_centred_targets_use_each_next_states_own_atoms_against_a_float64_loop(make_learner) -> None:
    """atoms = r + γ^m (σ (c'(s') + w z) + μ) with c' the target network's centre at s'; the state-value target
    is the target network's Q(s, a) on its centred atoms at s. Checked element by element in float64."""
    from foxhunt_plugins.losses.iql import value_centre

    learner = centred_learner(make_learner, dtype=torch.float64, popart_beta=0.3)
    for _ in range(3):
        learner.step(32)  # PopArt and the networks move away from their start
    batch = learner.sample(12)
    support = learner.update_support()
    taus = learner._taus(12, learner.config.n_target_quantiles)
    targets = learner.targets(batch, support, taus)
    target = learner.target
    with torch.no_grad():
        centre_next = value_centre(target.state_value_heads(target.features(batch.next_obs)), 0.5)  # [B, Branch]
        centre_here = value_centre(target.state_value_heads(target.features(batch.obs)), 0.5)
        probs_here = target(batch.obs, support).log_probs.exp()  # [B, Branch, A, N]
    mu, sigma = learner.popart.mu.tolist(), learner.popart.sigma.tolist()
    z = support.tolist()
    for i in range(12):
        for b in range(len(Branch)):
            r, g = float(batch.returns[i, b]), float(batch.discounts[i, b])
            atoms = [r + g * (sigma[b] * (float(centre_next[i, b]) + z[b][j]) + mu[b]) for j in range(len(z[b]))]
            torch.testing.assert_close(targets.atoms[i, b], torch.tensor(atoms, dtype=torch.float64), rtol=1e-12, atol=1e-12)
            unnorm = [sigma[b] * (float(centre_next[i, b]) + z[b][j]) + mu[b] for j in range(len(z[b]))]
            expected = r + g * sum(float(p) * u for p, u in zip(targets.probs[i, b], unnorm, strict=True))
            torch.testing.assert_close(targets.expected[i, b], torch.tensor(expected, dtype=torch.float64), rtol=1e-10, atol=1e-10)
            action = int(batch.actions[i, b])
            q_here = sum(float(p) * (float(centre_here[i, b]) + z[b][j]) for j, p in enumerate(probs_here[i, b, action]))
            torch.testing.assert_close(targets.taken_q[i, b], torch.tensor(sigma[b] * q_here + mu[b], dtype=torch.float64),
                                       rtol=1e-10, atol=1e-10)
    assert (targets.atoms[..., 1:] >= targets.atoms[..., :-1]).all()  # still sorted for the sorted projection


def test_centred_loss_inputs_carry_each_samples_atoms_and_the_value_target(make_learner) -> None:
    from foxhunt_plugins.losses.iql import value_centre

    learner = centred_learner(make_learner, dtype=torch.float64, iql_settings={"centre_mix": 0.8})
    inputs = learner.loss_inputs(learner.sample(16))
    online = learner.network
    with torch.no_grad():
        values = online.state_value_heads(online.features(inputs.batch.obs))
    expected = value_centre(values, 0.8)[..., None] + learner.update_support()
    torch.testing.assert_close(inputs.support, expected, rtol=1e-12, atol=1e-12)
    assert inputs.batch_support() is inputs.support  # [B, Branch, N]: projections land on each sample's atoms
    assert inputs.target_taken_q.shape == (16, len(Branch))


def test_centred_functional_gradients_equal_the_autograd_loop(make_learner) -> None:
    """The torch.func form (compiled updates) gives the eager loop's gradient with the value head and centred atoms."""
    from foxhunt.learner.functional import FunctionalGradients

    learner = centred_learner(make_learner, dtype=torch.float64)
    batch = learner.sample(32)
    support = learner.update_support()
    targets = learner.normalised_targets(batch, support, learner._taus(32, learner.config.n_target_quantiles))
    taus = learner._taus(32, learner.config.n_quantiles)
    reference = learner.loop_gradients(batch, support, taus, targets)
    groups = learner.reach_groups()
    assert [[learner.components[k].name for k in group] for group in groups] == [
        ["c51", "mse", "cql"], ["iqn"], ["ensemble"], ["iql"]]
    functional = FunctionalGradients(learner.network, learner.components, learner.priority_component,
                                     learner.gradients.limits, learner.config.max_grad_norm, learner.input_sources, groups)
    step = functional(learner.param_dict, batch, support, taus, targets)
    torch.testing.assert_close(reference.budgeted.flat, step.budgeted.flat, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(reference.losses, step.losses)


def test_a_centred_learner_is_deterministic_and_its_state_round_trips(make_learner) -> None:
    a = centred_learner(make_learner, seed=1)
    for _ in range(3):
        a.step(32)
    assert any(name.startswith("network.state_value_out") for name in a.state_dict())
    assert_resumes_identically(a, centred_learner(make_learner, seed=99, fill=0))
    assert math.isfinite(float(a.metrics()["loss.iql"]))


def test_gradient_sync_runs_once_per_update_between_combination_and_optimizer(make_learner) -> None:
    """The multi-device hook sees the budgeted combination in ``p.grad`` before AdamW steps, and AdamW steps on
    what the hook leaves there (here: the gradient doubled); a learner without a hook never calls one."""
    learner = make_learner(seed=2)
    assert learner.gradient_sync is None
    seen = []

    def double(hooked) -> None:
        assert hooked is learner
        seen.append((learner.gradients.flat_grad.clone(), float(learner.optimizer.state[learner.params[0]]["step"])))
        assert learner.params[0].grad.data_ptr() == learner.gradients.flat_grad.data_ptr()
        learner.gradients.flat_grad.mul_(2.0)

    learner.gradient_sync = double
    learner.step()
    assert len(seen) == 1
    grad, steps = seen[0]
    assert steps == 0.0  # the optimiser had not stepped yet
    assert float(grad.norm()) > 0.0
    torch.testing.assert_close(grad.norm(), learner.gradients.combined_norm)
    beta1 = learner.optimizer.param_groups[0]["betas"][0]
    first = learner.params[0]
    expected = (1 - beta1) * 2.0 * grad[: first.numel()].view_as(first)
    torch.testing.assert_close(learner.optimizer.state[first]["exp_avg"], expected)
    learner.step()
    assert len(seen) == 2
