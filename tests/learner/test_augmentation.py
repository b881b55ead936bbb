"""The replay's augmentation core: evenly spread positions, nothing before the fold is set, records applied in
name order with their per-fold tensors kept at fixed addresses, and the plugin host's collection of them."""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest
import torch

from foxhunt import AugmentationFold, ReplayAugmentation, hookimpl
from foxhunt.actions import Branch
from foxhunt.errors import PluginError
from foxhunt.learner import Replay, ReplayConfig
from foxhunt.learner.augmentation import selected_positions
from foxhunt.plugin.host import PluginHost

GAMMA = torch.full((len(Branch),), 0.9)
FOLD = AugmentationFold(("ret_1",), None, np.zeros(4))


@pytest.mark.parametrize(("fraction", "positions"), [(0.5, [1, 3, 5, 7, 9, 11, 13, 15]), (0.25, [3, 7, 11, 15]),
                                                     (0.2, [4, 9, 14]), (1.0, list(range(16)))])
def test_positions_are_evenly_spread(fraction: float, positions: list[int]) -> None:
    selected = selected_positions(16, fraction, "cpu")
    assert selected.shape == (16, 1)
    assert torch.nonzero(selected[:, 0]).flatten().tolist() == positions


def shifted(name: str, offset: float):
    """An augmentation adding ``offset × tensors['unit']`` to the selected observations, and recording its inputs."""
    seen = []

    def augment(inputs):
        seen.append(inputs)
        return dataclasses.replace(inputs.batch, obs=torch.where(inputs.selected, inputs.batch.obs + inputs.tensors["unit"] * offset,
                                                                 inputs.batch.obs))

    def prepare(fold):
        return {"unit": np.full(2, float(len(fold.feature_names)))}

    return ReplayAugmentation(name=name, augment=augment, fraction=0.5, prepare=prepare, description="test"), seen


def filled(records) -> Replay:
    replay = Replay(ReplayConfig(capacity=60), obs_dim=2, n_envs=3, n_step=2, device="cpu",
                    generator=torch.Generator().manual_seed(0), augmentations=records)
    g = torch.Generator().manual_seed(1)
    for _ in range(12):
        obs = torch.randn(3, 2, generator=g)
        replay.add(obs, torch.zeros(3, len(Branch), dtype=torch.long), torch.randn(3, generator=g), obs + 1, torch.zeros(3))
    return replay


def test_augmentations_apply_from_the_first_fold_on_with_their_one_step_rewards() -> None:
    record, seen = shifted("shift", 10.0)
    plain, augmented = filled(()), filled([record])
    uniforms = torch.rand(8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    before = augmented.sample_at(uniforms, GAMMA)
    assert not seen and torch.equal(before.obs, plain.sample_at(uniforms, GAMMA).obs)  # no fold yet: nothing applied
    augmented.set_fold(FOLD)
    plain.set_fold(FOLD)  # a replay without augmentations is unchanged by a fold
    original, batch = plain.sample_at(uniforms, GAMMA), augmented.sample_at(uniforms, GAMMA)
    odd = torch.arange(8) % 2 == 1
    torch.testing.assert_close(batch.obs[odd], original.obs[odd] + 10.0)
    assert torch.equal(batch.obs[~odd], original.obs[~odd])
    for field in ("actions", "returns", "discounts", "next_obs", "weights", "indices"):
        assert torch.equal(getattr(batch, field), getattr(original, field))
    row, env = torch.div(original.indices, 3, rounding_mode="floor"), original.indices % 3
    assert torch.equal(seen[-1].rewards, plain.rewards[row, env])  # the first term of each n-step return


def test_per_fold_tensors_keep_their_address_and_refuse_a_new_shape() -> None:
    record, _ = shifted("shift", 1.0)
    replay = filled([record])
    replay.set_fold(FOLD)
    held = replay.augmentations.tensors["shift"]["unit"]
    address = held.data_ptr()
    replay.set_fold(AugmentationFold(("a",), None, np.zeros(4)))
    assert held.data_ptr() == address and replay.augmentations.tensors["shift"]["unit"] is held
    wider = ReplayAugmentation(name="wide", augment=lambda inputs: inputs.batch, fraction=0.5, description="test",
                               prepare=lambda fold: {"unit": np.zeros(len(fold.feature_names))})
    replay = filled([wider])
    replay.set_fold(FOLD)
    with pytest.raises(ValueError, match="must not change between folds"):
        replay.set_fold(AugmentationFold(("a", "b"), None, np.zeros(4)))


def test_the_sampling_with_augmentations_traces_as_one_graph() -> None:
    """`[learner] compile = true` traces sample_at with fullgraph: the augmentation loop must not break it."""
    first, _ = shifted("a", 1.0)
    second, _ = shifted("b", -3.0)
    replay = filled([first, second])
    replay.set_fold(FOLD)
    uniforms = torch.rand(8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    compiled = torch.compile(replay.sample_at, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(uniforms, GAMMA).obs, replay.sample_at(uniforms, GAMMA).obs)


def plugin(*names: str) -> types.SimpleNamespace:
    @hookimpl
    def foxhunt_replay_augmentations(config):
        return [ReplayAugmentation(name=name, augment=lambda inputs: inputs.batch, fraction=0.5, description="test")
                for name in names]

    return types.SimpleNamespace(foxhunt_replay_augmentations=foxhunt_replay_augmentations)


def frozen(*plugins: tuple[object, str]) -> PluginHost:
    host = PluginHost()
    for module, name in plugins:
        host.add_plugin(module, name)
    host.declare()
    host.freeze()
    return host


def test_the_host_collects_augmentations_in_name_order_and_refuses_a_name_twice() -> None:
    host = frozen((plugin("zeta", "alpha"), "one"), (plugin("mid"), "two"))
    assert [record.name for record in host.replay_augmentations(None)] == ["alpha", "mid", "zeta"]
    assert {name: kind for name, (kind, _) in host.component_owners(None).items()} == {
        "alpha": "augmentation", "mid": "augmentation", "zeta": "augmentation"}
    with pytest.raises(PluginError, match="'alpha' from foxhunt_replay_augmentations is already used"):
        frozen((plugin("alpha"), "one"), (plugin("alpha"), "two")).replay_augmentations(None)


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, True])
def test_a_fraction_outside_the_unit_interval_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction must be in"):
        ReplayAugmentation(name="x", augment=lambda inputs: inputs.batch, fraction=fraction, description="test")
