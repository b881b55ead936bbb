"""The replay augmentations inside `foxhunt train`: the host collects the switched-on ones, the trainer gives the
replay each fold's constants (the mirror's map from the fold's normaliser, the cost model from the environment's
parameters), and a run with both applies them on its hot path to the end."""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from trainer_testkit import TINY, TINY_DATA

from foxhunt.config import load_config
from foxhunt.env.mirror import observation_mirror
from foxhunt.plugin.host import ENTRY_POINT_GROUP
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer
from foxhunt.env.tables import PortfolioObs
from foxhunt_plugins.augmentations import hindsight, mirror

AUGMENTATIONS = {"mirror": "foxhunt_plugins.augmentations.mirror", "hindsight": "foxhunt_plugins.augmentations.hindsight",
                 "attention": "foxhunt_plugins.encoders.attention"}


@pytest.fixture
def augmentation_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in augmentations (and the attention encoder) among the entry points even where the installed
    metadata predates them."""
    installed = metadata.entry_points

    def entry_points(**selection):
        if selection.get("group") != ENTRY_POINT_GROUP:
            return installed(**selection)
        found = list(installed(**selection))
        names = {entry.name for entry in found}
        return found + [metadata.EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in AUGMENTATIONS.items()
                        if name not in names]

    monkeypatch.setattr(metadata, "entry_points", entry_points)


def test_a_tiny_run_applies_the_mirror_and_hindsight_with_each_folds_constants(
        tmp_path: Path, augmentation_entry_points: None, _private_feature_cache: Path) -> None:
    overrides = [f'data.source="{TINY_DATA}"', *TINY, "folds.n_folds=1", "train.epochs=1",
                 "plugins.hindsight.enabled=true"]
    trainer = Trainer(load_config(None, overrides), RunDirectory(tmp_path / "run"), show_progress=False)
    trainer.run()
    assert (tmp_path / "run" / "summary.json").exists()
    augmentations = trainer.learner.replay.augmentations
    assert [record.name for record in augmentations.records] == ["hindsight", "mirror"] and augmentations.active
    expected = observation_mirror(tuple(trainer.data.features.names), trainer.normalizer)
    held = augmentations.tensors["mirror"]
    for key in ("scale", "shift", "low", "high"):
        torch.testing.assert_close(held[key], torch.from_numpy(getattr(expected, key)).to(held[key].dtype))
    costs = hindsight.hindsight_constants(type("Fold", (), {"env_params": trainer.env.params.double().numpy(),
                                                            "execution_branches": ()}))
    np.testing.assert_allclose(augmentations.tensors["hindsight"]["cost"].double().numpy(), costs["cost"], rtol=1e-6)


@pytest.mark.parametrize(("device", "fraction"), [("cpu", 0.45), ("cuda", 0.25)])
def test_the_default_run_mirrors_its_profiles_share_and_does_not_relabel(
        augmentation_entry_points: None, device: str, fraction: float) -> None:
    from foxhunt.plugin.host import PluginHost

    config = load_config(None, [f'run.device="{device}"'])  # the CPU profile's share; the GPU's is the class default
    host = PluginHost(config.plugins).discover().declare()
    host.freeze()
    assert [(record.name, record.fraction) for record in host.replay_augmentations(config)] == [("mirror", fraction)]


def test_a_tiny_run_with_the_attention_encoder_mirrors_every_bar_of_its_window(
        tmp_path: Path, augmentation_entry_points: None, _private_feature_cache: Path) -> None:
    """The replay rebuilds the window before the mirror runs: the fold's map covers ``W × F + P`` columns."""
    overrides = [f'data.source="{TINY_DATA}"', *TINY, "folds.n_folds=1", "train.epochs=1",
                 'learner.encoder="attention"', "plugins.attention.window=3", "plugins.attention.width=8",
                 "plugins.mirror.fraction=0.5"]
    trainer = Trainer(load_config(None, overrides), RunDirectory(tmp_path / "run"), show_progress=False)
    trainer.run()
    assert (tmp_path / "run" / "summary.json").exists()
    assert trainer.learner.window == 3 and trainer.learner.encoder.name == "attention"
    augmentations = trainer.learner.replay.augmentations
    assert [record.name for record in augmentations.records] == ["mirror"] and augmentations.active
    names = tuple(trainer.data.features.names)
    one_bar = observation_mirror(names, trainer.normalizer)
    held = augmentations.tensors["mirror"]
    assert held["scale"].shape == (3 * len(names) + len(PortfolioObs),)
    for key in ("scale", "shift", "low", "high"):
        expected = mirror.window_columns(getattr(one_bar, key), len(names), 3)
        torch.testing.assert_close(held[key], torch.from_numpy(expected).to(held[key].dtype))
    assert all(torch.isfinite(p).all() for p in trainer.learner.params)
