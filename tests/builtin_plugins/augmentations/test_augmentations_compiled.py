"""``[learner] compile = true`` with the mirror and hindsight switched on: the compiled update samples, augments and
learns what the eager update does, from one compilation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from foxhunt import AugmentationFold
from foxhunt.data.instrument import PRESETS
from foxhunt.env.config import EnvConfig, physics_params
from foxhunt.env.tables import PortfolioObs
from foxhunt.features import FEATURE_SETS, Normalizer
from foxhunt.isv import ISV
from foxhunt.learner import Learner
from foxhunt_plugins.augmentations import hindsight, mirror

PIECES = 5  # sample, prepare, gradients, record, after_optimizer: one graph each (fullgraph)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def fold() -> AugmentationFold:
    names = FEATURE_SETS["minimal"].names
    rng = np.random.default_rng(0)
    normalizer = Normalizer(mean=rng.normal(size=len(names)), std=rng.uniform(0.5, 2.0, size=len(names)), clip=3.0)
    return AugmentationFold(names, normalizer, physics_params(EnvConfig(), PRESETS["ES"], (0, 100)))


def fill(learner: Learner, width: int, steps: int = 40) -> None:
    """Random features; portfolio columns of whole positions and caps, mostly SHORT/LONG market orders."""
    g = torch.Generator().manual_seed(3)
    n = len(PortfolioObs)
    for _ in range(steps):
        obs = torch.randn(3, width, generator=g)
        obs[:, width - n + PortfolioObs.POSITION] = torch.randint(-10, 11, (3,), generator=g) / 10.0
        obs[:, width - n + PortfolioObs.CAP] = torch.randint(0, 11, (3,), generator=g) / 10.0
        actions = torch.stack([torch.randint(0, size, (3,), generator=g) for size in (4, 3, 2, 3)], dim=1)
        learner.replay.add(obs, actions, torch.randn(3, generator=g), torch.randn(3, width, generator=g),
                           (torch.rand(3, generator=g) < 0.1).float())


def test_compiled_updates_with_both_augmentations_match_eager_ones(kit) -> None:
    the_fold = fold()
    width = len(the_fold.feature_names) + len(PortfolioObs)
    records = [*hindsight.foxhunt_replay_augmentations(None, hindsight.HindsightSettings(enabled=True, fraction=0.5)),
               *mirror.foxhunt_replay_augmentations(None, mirror.MirrorSettings())]
    runs = []
    for compiled in (False, True):
        config = kit.small_config(compile=compiled)
        host, registries = kit.frozen_host()
        learner = Learner(config, registries.layout, ISV(registries.layout), host.loss_components(config), width, "cpu",
                          seed=2, n_envs=kit.n_envs, augmentations=records)
        learner.attach_state(registries.state)
        fill(learner, width)
        learner.replay.set_fold(the_fold)
        learner.step(32)
        assert counters["stats"]["unique_graphs"] == (PIECES if compiled else 0)
        with torch._dynamo.config.patch(error_on_recompile=True):
            learner.step(32)
        runs.append(learner)
    eager, compiled = runs
    for a, b in zip(eager.params, compiled.params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(eager.replay.priorities, compiled.replay.priorities, rtol=1e-4, atol=1e-6)
