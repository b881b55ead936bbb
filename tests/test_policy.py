"""A Policy saved and loaded is the same policy: the same files, the same greedy actions; a bad file is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from export_testkit import averaged_checkpoint, checkpoint  # noqa: F401 - fixtures
from learner_builders import make_learner  # noqa: F401 - a fixture
from trainer_testkit import _private_feature_cache  # noqa: F401 - a fixture

from foxhunt.checkpoint_backtest import load_policy
from foxhunt.checkpoint import METADATA_FILE, TENSORS_FILE, seal_metadata
from foxhunt.env.tables import PortfolioObs
from foxhunt.errors import CheckpointError, FingerprintMismatch
from foxhunt.features import Normalizer
from foxhunt.isv import IsvLayout
from foxhunt.plugin.host import PluginHost, PluginSelection
from foxhunt.policy import Policy


@pytest.fixture(scope="module")
def layout(checkpoint: Path) -> IsvLayout:  # noqa: F811 - the fixture imported above
    """The layout of the plugins the checkpoint was trained with, as ``foxhunt backtest`` finds it."""
    loaded = load_policy(checkpoint)
    loaded.host.close()
    return loaded.policy.isv.layout


def random_observations(policy: Policy, rows: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    width = len(policy.normalizer.mean) + PortfolioObs.size()  # normalised features, then the portfolio fields
    return torch.randn(rows, width, generator=generator) * 3.0


def test_save_then_load_writes_the_same_files_and_acts_identically(checkpoint: Path, layout: IsvLayout,  # noqa: F811
                                                                   tmp_path: Path) -> None:
    first = Policy.load(checkpoint, layout)
    again = Policy.load(first.save(tmp_path / "fold_0"), layout)
    for name in (TENSORS_FILE, METADATA_FILE):  # what save writes is all that load reads, and nothing is lost
        assert (tmp_path / "fold_0" / name).read_bytes() == (checkpoint / name).read_bytes(), name
    observations = random_observations(first, 512, seed=0)
    actions = first.greedy_actions(observations)
    assert len(set(map(tuple, actions.tolist()))) > 1  # a policy that does more than one thing
    assert torch.equal(again.greedy_actions(observations), actions)
    assert torch.equal(again.act_values(observations), first.act_values(observations))
    assert not torch.equal(first.popart.sigma, torch.ones_like(first.popart.sigma))  # trained: PopArt carried


def test_a_policy_of_a_learner_acts_as_the_learner(make_learner) -> None:  # noqa: F811 - the fixture imported above
    learner = make_learner(seed=2)
    for _ in range(4):
        learner.step(32)
    policy = Policy.of_learner(learner, Normalizer(np.zeros(1), np.ones(1)), {})
    observations = torch.randn(64, learner.obs_dim, generator=torch.Generator().manual_seed(1))
    assert torch.equal(policy.act_values(observations), learner.act_values(observations))
    assert torch.equal(policy.greedy_actions(observations), learner.act_values(observations).argmax(-1))


def test_state_round_trips_and_a_wrong_shape_is_refused_by_name(make_learner) -> None:  # noqa: F811
    normalizer = Normalizer(np.zeros(1), np.ones(1))
    source = Policy.of_learner(make_learner(fill=0), normalizer, {})
    target = Policy.of_learner(make_learner(seed=5, fill=0), normalizer, {})
    state = source.state_dict()
    target.load_state_dict(state)
    assert all(torch.equal(t, target.state_dict()[name]) for name, t in state.items())
    wider = Policy.of_learner(make_learner(head_hidden=12, fill=0), normalizer, {}).state_dict()
    with pytest.raises(CheckpointError, match=r"policy state 'network\.value_hidden\.weight' is torch\.float32 \(12, 16\), expected"):
        target.load_state_dict(wider)


def test_a_wrong_dtype_is_refused_before_anything_is_copied(make_learner) -> None:  # noqa: F811
    normalizer = Normalizer(np.zeros(1), np.ones(1))
    source = Policy.of_learner(make_learner(fill=0), normalizer, {})
    target = Policy.of_learner(make_learner(seed=5, fill=0), normalizer, {})
    before = target.state_dict()
    state = source.state_dict()
    last = sorted(name for name, t in state.items() if t.is_floating_point())[-1]
    state[last] = state[last].double()  # copy_ would cast it silently
    with pytest.raises(CheckpointError, match=rf"'{last}' is torch\.float64"):
        target.load_state_dict(state)
    assert all(torch.equal(t, target.state_dict()[name]) for name, t in before.items())


def test_load_refuses_a_tampered_file(checkpoint: Path, layout: IsvLayout, tmp_path: Path) -> None:  # noqa: F811
    copy = tmp_path / "fold_0"
    shutil.copytree(checkpoint, copy)
    data = bytearray((copy / TENSORS_FILE).read_bytes())
    data[-3] ^= 0xFF
    (copy / TENSORS_FILE).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="tensor file does not match the SHA-256 in its metadata; the checkpoint is damaged or altered"):
        Policy.load(copy, layout)


def test_load_refuses_another_layout_with_the_slot_diff(checkpoint: Path, layout: IsvLayout) -> None:  # noqa: F811
    host = PluginHost(PluginSelection(disable=("tau",))).discover().declare()
    other = host.freeze().layout
    assert other.fingerprint != layout.fingerprint
    with pytest.raises(FingerprintMismatch, match="tau"):
        Policy.load(checkpoint, other)


def test_load_refuses_a_resume_checkpoint(checkpoint: Path, layout: IsvLayout, tmp_path: Path) -> None:  # noqa: F811
    """A metadata kind other than a policy's, sealed as foxhunt would, is named."""
    copy = tmp_path / "fold_0"
    shutil.copytree(checkpoint, copy)
    metadata = json.loads((copy / METADATA_FILE).read_text(encoding="utf-8"))
    metadata["kind"] = "resume"
    seal_metadata(metadata, metadata["integrity"]["tensors_sha256"])
    (copy / METADATA_FILE).write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(CheckpointError, match="this is a 'resume' checkpoint; backtest and export take a fold checkpoint"):
        Policy.load(copy, layout)


def test_a_policy_with_a_state_value_head_saves_and_loads(checkpoint: Path, layout: IsvLayout,  # noqa: F811
                                                         tmp_path: Path) -> None:
    """A run whose loss asked for a state-value head (the IQL value head) saves it with the network; loading finds
    its width in the tensors and builds the same network, which acts as the saved one did."""
    first = Policy.load(checkpoint, layout)
    assert first.network.state_value_out is None
    headed = Policy._untrained(first.config, first.network.trunk[0].in_features - PortfolioObs.size(), first.isv,
                               first.normalizer, first.metadata, first.encoder, state_values=2)
    loaded = Policy.load(headed.save(tmp_path / "fold_0"), layout)
    assert tuple(loaded.network.state_value_out.bias.shape) == (first.network.n_branches, 2)
    for name, tensor in headed.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    observations = random_observations(first, 64, seed=3)
    assert torch.equal(loaded.act_values(observations), headed.act_values(observations))


def test_an_averaged_policy_acts_on_the_mean_of_its_epochs_and_round_trips(
        checkpoint: Path, averaged_checkpoint: Path, layout: IsvLayout, tmp_path: Path) -> None:  # noqa: F811
    averaged = Policy.load(averaged_checkpoint, layout)
    best = Policy.load(checkpoint, layout)
    (member,) = averaged.members
    assert averaged.metadata["members"] == [{"epoch": best.metadata["epoch"] + 1,
                                             "validation": best.metadata["validation"]}]
    observations = random_observations(best, 512, seed=4)
    mean = (best.act_values(observations).double() + member.act_values(observations).double()) / 2.0  # float64
    values = averaged.act_values(observations)
    real = torch.isfinite(mean)
    assert torch.equal(torch.isfinite(values), real)  # padded sub-actions stay -inf
    torch.testing.assert_close(values[real].double(), mean[real], rtol=0.0, atol=1e-6)
    # the average is neither epoch: each of them acts otherwise on some rows
    for one in (best, member):
        assert not torch.equal(averaged.greedy_actions(observations), one.greedy_actions(observations))
    Policy.load(averaged.save(tmp_path / "fold_0"), layout)  # saved again: the same files
    for name in (TENSORS_FILE, METADATA_FILE):
        assert (tmp_path / "fold_0" / name).read_bytes() == (averaged_checkpoint / name).read_bytes(), name


def test_load_refuses_a_members_list_that_is_not_one(averaged_checkpoint: Path, layout: IsvLayout,  # noqa: F811
                                                     tmp_path: Path) -> None:
    copy = tmp_path / "fold_0"
    shutil.copytree(averaged_checkpoint, copy)
    metadata = json.loads((copy / METADATA_FILE).read_text(encoding="utf-8"))
    metadata["members"] = [{"epoch": "one"}]
    seal_metadata(metadata, metadata["integrity"]["tensors_sha256"])
    (copy / METADATA_FILE).write_text(json.dumps(metadata), encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"metadata 'members' is \[\{'epoch': 'one'\}\], expected a list of"):
        Policy.load(copy, layout)
