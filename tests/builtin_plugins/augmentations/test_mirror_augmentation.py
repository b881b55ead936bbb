"""The mirror plugin: its share of each batch mirrored, the same bits as the replay's mirror before it became a
plugin (a transcription of that code is the reference, batch by batch and over a few learner updates), its
settings and the keys it took over."""

from __future__ import annotations

import dataclasses

import attrs
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt import AugmentationFold
from foxhunt.actions import BRANCH_TABLES, Branch, Direction
from foxhunt.env.mirror import observation_mirror
from foxhunt.env.tables import EP, PortfolioObs
from foxhunt.features import FEATURE_SETS, Normalizer
from foxhunt.learner import Learner, Replay, ReplayConfig
from foxhunt.plugin.host import PluginHost, PluginSelection
from foxhunt_plugins.augmentations import mirror

GAMMA = torch.full((len(Branch),), 0.9)


def record(fraction: float = 0.25, constants=None):
    """The plugin's record at ``fraction``; ``constants`` replaces the fold's map (a small hand-made one)."""
    (found,) = mirror.foxhunt_replay_augmentations(None, mirror.MirrorSettings(fraction=fraction))
    return found if constants is None else attrs.evolve(found, prepare=lambda fold: {**mirror_constants_of(fold),
                                                                                      **constants})


def mirror_constants_of(fold: AugmentationFold) -> dict:
    swapped = {Direction.SHORT: Direction.LONG, Direction.LONG: Direction.SHORT}
    width = max(table.size() for table in BRANCH_TABLES.values())
    return {"codes": np.array([swapped.get(c, c) for c in range(width)]), "columns": np.arange(len(Branch)) == Branch.DIRECTION}


def pre_plugin_mirrored(batch, fraction: float, scale, shift, low, high):
    """The replay's ``_mirrored`` before the mirror was a plugin (commit 857d013), transcribed: the reference."""
    obs, actions, next_obs = batch.obs, batch.actions, batch.next_obs
    position = torch.arange(obs.shape[0] + 1, device=obs.device, dtype=torch.float64)
    crossed = torch.floor(position * fraction)
    flip = (crossed[1:] > crossed[:-1])[:, None]
    swapped = {Direction.SHORT: Direction.LONG, Direction.LONG: Direction.SHORT}
    codes = torch.tensor([swapped.get(code, code) for code in range(max(t.size() for t in BRANCH_TABLES.values()))])
    columns = torch.arange(len(Branch)) == Branch.DIRECTION

    def mirrored(x):
        return torch.where(flip, torch.clamp(x * scale + shift, low, high), x)

    actions = torch.where(flip & columns[None, :], codes[actions], actions)
    return dataclasses.replace(batch, obs=mirrored(obs), actions=actions, next_obs=mirrored(next_obs))


def fill(replays, obs_dim: int, steps: int = 20, seed: int = 2) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        obs = torch.randn(3, obs_dim, generator=g)
        actions = torch.stack([torch.randint(0, size, (3,), generator=g) for size in (4, 3, 2, 3)], dim=1)
        rewards, dones = torch.randn(3, generator=g), (torch.rand(3, generator=g) < 0.1).float()
        for replay in replays:
            replay.add(obs, actions, rewards, obs + 1.0, dones)


def replay_with(records, obs_dim: int = 2) -> Replay:
    return Replay(ReplayConfig(capacity=60), obs_dim=obs_dim, n_envs=3, n_step=3, device="cpu",
                  generator=torch.Generator().manual_seed(4), augmentations=records)


FOLD = AugmentationFold(("ret_1",), None, np.zeros(len(EP)))
SMALL = {"scale": np.array([-1.0, 1.0]), "shift": np.array([0.5, 0.0]), "low": np.array([-2.0, -np.inf]),
         "high": np.array([2.0, np.inf])}


@pytest.mark.parametrize(("fraction", "mirrored"), [(0.5, [1, 3, 5, 7, 9, 11, 13, 15]), (0.25, [3, 7, 11, 15]),
                                                     (0.2, [4, 9, 14])])
def test_mirror_replaces_its_share_of_sampled_transitions_by_their_mirror(fraction: float, mirrored: list[int]) -> None:
    plain, mirroring = replay_with(()), replay_with([record(fraction, SMALL)])
    fill((plain, mirroring), 2)
    mirroring.set_fold(FOLD)
    uniforms = torch.rand(16, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    original, mirror_batch = plain.sample_at(uniforms, GAMMA), mirroring.sample_at(uniforms, GAMMA)
    odd = torch.tensor(mirrored)
    even = torch.tensor([i for i in range(16) if i not in mirrored])
    for field in ("obs", "next_obs", "actions"):
        torch.testing.assert_close(getattr(mirror_batch, field)[even], getattr(original, field)[even])
    for field in ("returns", "discounts", "weights", "indices"):
        torch.testing.assert_close(getattr(mirror_batch, field), getattr(original, field))
    scale, shift, low, high = (torch.tensor(SMALL[k], dtype=torch.float32) for k in ("scale", "shift", "low", "high"))
    for field in ("obs", "next_obs"):
        torch.testing.assert_close(getattr(mirror_batch, field)[odd],
                                   torch.clamp(getattr(original, field)[odd] * scale + shift, low, high))
    swapped = {Direction.SHORT: Direction.LONG, Direction.LONG: Direction.SHORT}
    direction = original.actions[odd, Branch.DIRECTION].tolist()
    assert mirror_batch.actions[odd, Branch.DIRECTION].tolist() == [swapped.get(d, d) for d in direction]
    assert set(direction) & {Direction.SHORT, Direction.LONG}  # the draw holds a side to swap
    others = [b for b in Branch if b != Branch.DIRECTION]
    torch.testing.assert_close(mirror_batch.actions[odd][:, others], original.actions[odd][:, others])


def test_mirrored_sampling_traces_as_one_graph() -> None:
    """`[learner] compile = true` traces sample_at with fullgraph: the mirror must not break the graph."""
    replay = replay_with([record(0.5, SMALL)])
    fill((replay,), 2)
    replay.set_fold(FOLD)
    uniforms = torch.rand(8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    compiled = torch.compile(replay.sample_at, backend="eager", fullgraph=True)(uniforms, GAMMA)
    eager = replay.sample_at(uniforms, GAMMA)
    assert torch.equal(compiled.obs, eager.obs) and torch.equal(compiled.actions, eager.actions)


def real_fold(seed: int = 0, window: int = 1) -> tuple[AugmentationFold, int]:
    names = FEATURE_SETS["minimal"].names
    rng = np.random.default_rng(seed)
    normalizer = Normalizer(mean=rng.normal(size=len(names)), std=rng.uniform(0.5, 2.0, size=len(names)), clip=3.0)
    return AugmentationFold(names, normalizer, np.zeros(len(EP)), window=window), len(names) + len(PortfolioObs)


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.2])
def test_sampled_batches_are_bit_identical_to_the_pre_plugin_mirror(fraction: float) -> None:
    fold, width = real_fold()
    plain, mirroring = replay_with((), width), replay_with([record(fraction)], width)
    fill((plain, mirroring), width, steps=25)
    mirroring.set_fold(fold)
    reference = mirror.mirror_constants(fold)
    scale, shift, low, high = (torch.from_numpy(reference[k]).to(torch.float32) for k in ("scale", "shift", "low", "high"))
    draws = torch.Generator().manual_seed(3)
    for _ in range(5):
        uniforms = torch.rand(32, generator=draws, dtype=torch.float64)
        expected = pre_plugin_mirrored(plain.sample_at(uniforms, GAMMA), fraction, scale, shift, low, high)
        got = mirroring.sample_at(uniforms, GAMMA)
        for field in dataclasses.fields(got):
            value, reference = getattr(got, field.name), getattr(expected, field.name)
            if reference is None:  # future returns: only an auxiliary task's replay gathers them
                assert value is None, field.name
            else:
                assert torch.equal(value, reference), field.name


def test_a_few_updates_lose_exactly_what_they_lost_before_the_mirror_was_a_plugin(kit) -> None:
    """The default run's bits: the plugin's learner and a plain learner whose sampling is the pre-plugin mirror."""
    fold, width = real_fold(1)
    config = kit.small_config()
    reference = mirror.mirror_constants(fold)
    maps = [torch.from_numpy(reference[k]).to(torch.float32) for k in ("scale", "shift", "low", "high")]

    def learner(augmentations) -> Learner:
        host, registries = kit.frozen_host()
        from foxhunt.isv import ISV

        built = Learner(config, registries.layout, ISV(registries.layout), host.loss_components(config), width, "cpu",
                        seed=5, n_envs=kit.n_envs, augmentations=augmentations)
        built.attach_state(registries.state)
        return built

    plugin, before, unmirrored = learner([record()]), learner(()), learner(())
    plain_sample = before.replay.sample_at
    before.replay.sample_at = lambda uniforms, gamma: pre_plugin_mirrored(plain_sample(uniforms, gamma), 0.25, *maps)
    fill((plugin.replay, before.replay, unmirrored.replay), width, steps=30, seed=7)
    plugin.replay.set_fold(fold)
    for _ in range(3):
        plugin.step(16)
        before.step(16)
        unmirrored.step(16)
        assert torch.equal(plugin.loss_values, before.loss_values)
    assert not torch.equal(plugin.loss_values, unmirrored.loss_values)  # the mirror did change the updates
    for mine, theirs in zip(plugin.params, before.params, strict=True):
        assert torch.equal(mine, theirs)


def test_on_at_a_quarter_by_default_and_nothing_when_switched_off() -> None:
    host = PluginHost(PluginSelection(settings={"mirror": {}}))
    host.add_plugin(mirror, mirror.NAME)
    host.declare()
    host.freeze()
    assert host.settings("mirror") == mirror.MirrorSettings(enabled=True, fraction=0.25)
    assert [(r.name, r.fraction) for r in host.replay_augmentations(None)] == [("mirror", 0.25)]
    assert mirror.foxhunt_replay_augmentations(None, mirror.MirrorSettings(enabled=False)) == []


@pytest.mark.parametrize("fraction", [0.0, 0.51])
def test_a_share_beyond_a_half_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError):
        mirror.MirrorSettings(fraction=fraction)


def windowed_replays(fold: AugmentationFold, width: int, seed: int) -> tuple[Replay, Replay]:
    """A plain and a mirroring float64 replay with the fold's encoder window, filled over one random feature
    matrix (values up to ±4: some beyond the normaliser's clip)."""
    n_features, window = len(fold.feature_names), fold.window
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(40, n_features, generator=g, dtype=torch.float64) * 2.0

    def replay(records) -> Replay:
        built = Replay(ReplayConfig(capacity=60), width, 3, 3, "cpu", torch.Generator().manual_seed(4), torch.float64,
                       records, window=window, n_features=n_features)
        built.set_features(features)
        return built

    plain, mirroring = replay(()), replay([record(0.5)])
    bars = torch.tensor([0, 7, 20])
    for _ in range(15):
        portfolio, next_portfolio = (torch.randn(3, len(PortfolioObs), generator=g, dtype=torch.float64) for _ in "ab")
        obs, next_obs = torch.cat([features[bars], portfolio], 1), torch.cat([features[bars + 1], next_portfolio], 1)
        actions = torch.stack([torch.randint(0, size, (3,), generator=g) for size in (4, 3, 2, 3)], dim=1)
        rewards = torch.randn(3, generator=g, dtype=torch.float64)
        for built in (plain, mirroring):
            built.add(obs, actions, rewards, next_obs, torch.zeros(3), bars, bars + 1)
        bars = bars + 1
    mirroring.set_fold(fold)
    return plain, mirroring


@settings(deadline=None, max_examples=10)
@given(window=st.integers(2, 5), seed=st.integers(0, 2**16))
def test_with_a_window_every_bar_of_it_is_mirrored_as_the_one_bar_mirror_mirrors_it(window: int, seed: int) -> None:
    """Each of the W bars' features in a windowed observation, and its portfolio, mirrored as the one-bar map
    (float64, ``ObservationMirror.apply``) mirrors an observation of that bar's features and the portfolio."""
    fold, width = real_fold(seed, window)
    n_features, n_portfolio = len(fold.feature_names), len(PortfolioObs)
    one_bar = observation_mirror(fold.feature_names, fold.normalizer)
    plain, mirroring = windowed_replays(fold, width, seed)
    uniforms = torch.rand(16, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    original, mirrored = plain.sample_at(uniforms, GAMMA), mirroring.sample_at(uniforms, GAMMA)
    odd = np.arange(1, 16, 2)
    for field in ("obs", "next_obs"):
        before, after = getattr(original, field).numpy(), getattr(mirrored, field).numpy()
        assert before.shape == (16, window * n_features + n_portfolio)
        np.testing.assert_array_equal(after[odd - 1], before[odd - 1])
        portfolio = before[:, -n_portfolio:]
        for bar in range(window):
            columns = slice(bar * n_features, (bar + 1) * n_features)
            expected = one_bar.apply(np.concatenate([before[:, columns], portfolio], 1))
            np.testing.assert_allclose(after[odd, columns], expected[odd, :n_features], rtol=1e-15, atol=1e-15)
            np.testing.assert_allclose(after[odd, -n_portfolio:], expected[odd, n_features:], rtol=1e-15, atol=1e-15)
        assert not np.array_equal(after[odd], before[odd])  # the draw has something to mirror
    assert torch.equal(mirrored.returns, original.returns) and torch.equal(mirrored.indices, original.indices)


def test_the_one_bar_constants_are_the_observation_mirror_itself_and_a_window_repeats_the_features_only() -> None:
    fold, width = real_fold(3)
    n_features = len(fold.feature_names)
    one_bar, windowed = mirror.mirror_constants(fold), mirror.mirror_constants(attrs.evolve(fold, window=3))
    expected = observation_mirror(fold.feature_names, fold.normalizer)
    for key in ("scale", "shift", "low", "high"):
        assert np.array_equal(one_bar[key], getattr(expected, key))
        assert windowed[key].shape == (3 * n_features + len(PortfolioObs),)
        assert np.array_equal(windowed[key], np.concatenate([one_bar[key][:n_features]] * 2 + [one_bar[key]]))


def test_a_fold_for_another_window_is_refused_by_the_replay() -> None:
    fold, width = real_fold(0, 2)
    plain, _ = windowed_replays(fold, width, 0)
    with pytest.raises(ValueError, match="window of 1 bars, but this replay samples windows of 2"):
        plain.set_fold(attrs.evolve(fold, window=1))


def test_windowed_mirrored_sampling_traces_as_one_graph() -> None:
    """`[learner] compile = true` traces sample_at with fullgraph: the window gather, then the mirror."""
    fold, width = real_fold(2, 3)
    _, mirroring = windowed_replays(fold, width, 2)
    uniforms = torch.rand(8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    compiled = torch.compile(mirroring.sample_at, backend="eager", fullgraph=True)(uniforms, GAMMA)
    eager = mirroring.sample_at(uniforms, GAMMA)
    assert torch.equal(compiled.obs, eager.obs) and torch.equal(compiled.next_obs, eager.next_obs)
    assert torch.equal(compiled.actions, eager.actions)
