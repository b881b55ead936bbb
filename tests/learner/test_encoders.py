"""Encoders: the window gathered by bar index, its causality, the replay's windows, the mlp path bit for bit,
and the attention encoder in a real run through its checkpoint."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math
from pathlib import Path

import attrs
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file
from trainer_testkit import TINY, TINY_DATA, invoke, train_args

import foxhunt.learner.declarations as declarations
from foxhunt import AugmentationFold, AugmentationInputs, ReplayAugmentation
from foxhunt.actions import Branch, branch_sizes
from foxhunt.contract import FeatureGroup
from foxhunt.tooling.audit import parse_rows
from foxhunt.checkpoint_backtest import backtest_checkpoint, load_policy
from foxhunt.env.tables import PortfolioObs
from foxhunt.errors import CheckpointError, ConfigError, LayoutError
from foxhunt.learner import MLP_ENCODER, Batch, Learner, Replay, ReplayConfig, select_encoder, window_input
from foxhunt.learner.encoders import window_indices
from foxhunt.plugin.host import ENTRY_POINT_GROUP
from foxhunt.policy_export import export_policy
from foxhunt.isv import ISV
from foxhunt_plugins.encoders import attention, scan, vsn

PORTFOLIO = 3  # a portfolio width for the unit tests (the environment's is PortfolioObs.size())


def observations(features: torch.Tensor, bars: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """What the environment writes: the features of each bar, then portfolio fields."""
    return torch.cat([features[bars], torch.randn(bars.shape[0], PORTFOLIO, generator=generator)], dim=1)


def test_window_rows_are_the_bars_before_oldest_first_and_the_first_bar_repeats() -> None:
    g = torch.Generator().manual_seed(0)
    features = torch.randn(10, 2, generator=g)
    bars = torch.tensor([5, 1])
    obs = observations(features, bars, g)
    x = window_input(obs, bars, features, 3)
    assert x.shape == (2, 3 * 2 + PORTFOLIO)
    assert torch.equal(x[0, :6], torch.cat([features[3], features[4], features[5]]))
    assert torch.equal(x[1, :6], torch.cat([features[0], features[0], features[1]]))  # bar -1 padded by bar 0
    assert torch.equal(x[:, 6:], obs[:, 2:])  # the portfolio at t, last
    assert window_indices(torch.tensor([0.0, 7.0]), 3).tolist() == [[0, 0, 0], [5, 6, 7]]  # PS.BAR is a float


def test_a_one_bar_window_is_the_observation_itself() -> None:
    obs = torch.randn(4, 5)
    assert window_input(obs, torch.zeros(4), torch.randn(8, 2), 1) is obs


@settings(deadline=None)
@given(n_bars=st.integers(2, 12), window=st.integers(2, 5), data=st.data())
def test_changing_bars_after_t_never_changes_the_encoder_input_at_t(n_bars: int, window: int, data) -> None:
    """The causality property, through the gather and through the attention encoder's output."""
    seed = data.draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    t = data.draw(st.integers(0, n_bars - 2))
    features = torch.randn(n_bars, 3, generator=g, dtype=torch.float64)
    changed = features.clone()
    changed[t + 1:] = torch.randn(n_bars - t - 1, 3, generator=g, dtype=torch.float64) * 10
    bars = torch.tensor([t])
    portfolio = torch.randn(1, PORTFOLIO, generator=g, dtype=torch.float64)
    before = window_input(torch.cat([features[bars], portfolio], 1), bars, features, window)
    after = window_input(torch.cat([changed[bars], portfolio], 1), bars, changed, window)
    assert torch.equal(before, after)
    torch.manual_seed(seed)
    encoder = attention.build(3, PORTFOLIO, attention.AttentionSettings(window=window, width=4, heads=2)).double()
    assert torch.equal(encoder(before), encoder(after))
    encoder = scan.build(3, PORTFOLIO, scan.ScanSettings(window=window, width=4, state=2, heads=2)).double()
    assert torch.equal(encoder(before), encoder(after))
    # and a bar at or before t does change it: the window is not blind
    earlier = features.clone()
    earlier[t] += 1.0
    moved = window_input(torch.cat([earlier[bars], portfolio], 1), bars, earlier, window)
    assert not torch.equal(moved, before)


def test_an_unknown_encoder_is_refused_naming_the_available_ones() -> None:
    with pytest.raises(ConfigError, match=r"learner.encoder: 'lstm' is not an encoder .*available: mlp"):
        select_encoder([MLP_ENCODER], "lstm")


def test_the_core_ships_the_audit_row_of_its_encoder_as_the_repository_lists_it() -> None:
    [shipped] = [row for row in parse_rows(declarations.FOXHUNT_AUDIT, "module") if row.name == "mlp"]
    table = Path(__file__).resolve().parents[2] / "docs" / "audits" / "components.md"
    [listed] = [row for row in parse_rows(table.read_text(encoding="utf-8"), "docs") if row.name == "mlp"]
    assert (shipped.kind, shipped.plugin, shipped.status, shipped.tests) == (
        listed.kind, listed.plugin, listed.status, listed.tests)
    assert declarations.foxhunt_encoders() == [MLP_ENCODER]


def windowed_replay(window: int, augmentations=()) -> tuple[Replay, torch.Tensor, list[tuple[torch.Tensor, ...]]]:
    """A replay of 2 environments with a window, filled with 12 steps over a 30-bar feature matrix."""
    n_features, n_envs = 2, 2
    replay = Replay(ReplayConfig(capacity=40), n_features + PORTFOLIO, n_envs, 2, "cpu",
                    torch.Generator().manual_seed(3), augmentations=augmentations, window=window, n_features=n_features)
    g = torch.Generator().manual_seed(5)
    features = torch.randn(30, n_features, generator=g)
    replay.set_features(features)
    steps = []
    bars = torch.tensor([0, 9])
    for _ in range(12):
        obs, next_obs = observations(features, bars, g), observations(features, bars + 1, g)
        actions = torch.stack([torch.randint(0, size, (n_envs,), generator=g) for size in branch_sizes()], dim=1)
        rewards, dones = torch.randn(n_envs, generator=g), torch.zeros(n_envs)
        replay.add(obs, actions, rewards, next_obs, dones, bars, bars + 1)
        steps.append((obs, bars.clone(), next_obs, bars + 1))
        bars = bars + 1
    return replay, features, steps


def test_the_replay_rebuilds_each_window_from_the_stored_bar_index() -> None:
    replay, features, steps = windowed_replay(4)
    batch = replay.sample_at(torch.rand(8, generator=torch.Generator().manual_seed(1), dtype=torch.float64),
                             torch.full((len(Branch),), 0.9))
    row, env = torch.div(batch.indices, 2, rounding_mode="floor"), torch.remainder(batch.indices, 2)
    for k in range(8):
        obs, bars, _, _ = steps[int(row[k])]
        e = int(env[k])
        expected = window_input(obs[e:e + 1], bars[e:e + 1], features, 4)
        assert torch.equal(batch.obs[k:k + 1], expected)
    assert batch.obs.shape == (8, 4 * 2 + PORTFOLIO) and batch.next_obs.shape == batch.obs.shape
    assert {"bars", "next_bars"} <= set(replay.state_dict())
    replay.reset()
    assert not replay.bars.any() and not replay.next_bars.any()


def test_a_one_bar_replay_keeps_its_state_as_before_encoders() -> None:
    replay = Replay(ReplayConfig(capacity=40), 5, 2, 2, "cpu", torch.Generator())
    assert not {"bars", "next_bars"} & set(replay.state_dict())


def negate_selected(inputs: AugmentationInputs) -> Batch:
    flip = inputs.selected
    return dataclasses.replace(inputs.batch, obs=torch.where(flip, -inputs.batch.obs, inputs.batch.obs),
                               next_obs=torch.where(flip, -inputs.batch.next_obs, inputs.batch.next_obs))


def test_augmentations_see_the_window_built_before_them() -> None:
    """The replay rebuilds each window first, then its augmentations run on the ``[B, W × F + P]`` input (the
    mirror's every-bar map: tests/builtin_plugins/augmentations/test_mirror_augmentation.py)."""
    negate = ReplayAugmentation(name="negate", augment=negate_selected, fraction=0.5, description="negated")
    plain, _, _ = windowed_replay(3)
    augmented, _, _ = windowed_replay(3, [negate])
    augmented.set_fold(AugmentationFold(("a", "b"), None, None, window=3))
    uniforms = torch.rand(8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    gamma = torch.full((len(Branch),), 0.9)
    original, changed = plain.sample_at(uniforms, gamma), augmented.sample_at(uniforms, gamma)
    odd = torch.arange(1, 8, 2)
    assert changed.obs.shape == (8, 3 * 2 + PORTFOLIO)
    for field in ("obs", "next_obs"):
        assert torch.equal(getattr(changed, field)[odd], -getattr(original, field)[odd])
        assert torch.equal(getattr(changed, field)[odd - 1], getattr(original, field)[odd - 1])
    with pytest.raises(ValueError, match="window of 1 bars"):
        augmented.set_fold(AugmentationFold(("a", "b"), None, None))


def small_learner(kit, encoders, **changes) -> Learner:
    host, registries = kit.frozen_host(extra=[(attention, attention.NAME), (scan, scan.NAME)],
                                       settings={"attention": {"window": 3, "width": 8, "heads": 2},
                                                 "scan": {"window": 3, "width": 8, "state": 4, "heads": 2}})
    config = kit.small_config(**changes)
    from foxhunt.isv import ISV

    isv = ISV(registries.layout, "cpu")
    return Learner(config, registries.layout, isv, host.loss_components(config), kit.obs_dim, "cpu", 0,
                   n_envs=kit.n_envs, encoders=host.encoders(config) if encoders is None else encoders, n_features=2)


def fill_windowed(learner: Learner, features: torch.Tensor, steps: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """``steps`` transitions of 3 environments over ``features`` (2 columns); the last observations and bars."""
    g = torch.Generator().manual_seed(4)
    portfolio = learner.obs_dim - 2
    for step in range(steps):
        bars = torch.tensor([step, step + 5, step + 10])
        obs = torch.cat([features[bars], torch.randn(3, portfolio, generator=g)], 1)
        next_obs = torch.cat([features[bars + 1], torch.randn(3, portfolio, generator=g)], 1)
        actions = torch.stack([torch.randint(0, size, (3,), generator=g) for size in branch_sizes()], dim=1)
        learner.replay.add(obs, actions, torch.randn(3, generator=g), next_obs, torch.zeros(3), bars, bars + 1)
    return obs, bars


def test_the_learner_writes_an_encoders_slot_values_and_refuses_a_wrong_name_or_width(kit) -> None:
    """``Encoder.slot_values`` at an epoch boundary: written into the ISV (and the diagnostics, none here, are
    ``{}``); names other than ``writes``, or a value not as wide as its slot, stop with the encoder and the slot
    named."""
    returned: dict = {}

    def slot_values(module, inputs, feature_groups):
        assert feature_groups == ("market", "book") and inputs.shape[1] == kit.obs_dim
        return dict(returned)

    slot = vsn.GROUP_SELECTION  # a slot FeatureGroup wide, declared by the vsn plugin
    width = FeatureGroup.size()
    encoder = attrs.evolve(MLP_ENCODER, slot_values=slot_values, writes=(slot,))
    host, registries = kit.frozen_host(extra=[(vsn, vsn.NAME)])
    config = kit.small_config()
    learner = Learner(config, registries.layout, ISV(registries.layout, "cpu"), host.loss_components(config),
                      kit.obs_dim, "cpu", 0, n_envs=kit.n_envs, encoders=[encoder], n_features=2)
    returned[slot] = torch.arange(float(width))
    learner.encoder_epoch(("a", "b"), ("market", "book"))  # an empty replay: nothing to read, nothing written
    assert learner.isv.view(slot).tolist() == [0.0] * width
    kit.fill_replay(learner, 4)
    assert learner.encoder_epoch(("a", "b"), ("market", "book")) == {}
    assert learner.isv.view(slot).tolist() == [float(k) for k in range(width)]
    returned[slot] = [0.5, 0.5]
    with pytest.raises(LayoutError,
                       match=f"encoder 'mlp' returned 2 values for ISV slot '{slot}', which is {width} wide"):
        learner.encoder_epoch(("a", "b"), ("market", "book"))
    returned.clear()
    with pytest.raises(LayoutError, match=rf"encoder 'mlp' returned slot values for \[\], but its writes are \['{slot}'\]"):
        learner.encoder_epoch(("a", "b"), ("market", "book"))


@pytest.mark.parametrize("encoder", ["attention", "scan"])
def test_a_learner_with_a_window_encoder_acts_and_updates_on_windows(kit, encoder: str) -> None:
    learner = small_learner(kit, None, encoder=encoder)
    assert learner.window == 3 and learner.input_dim == 3 * 2 + (kit.obs_dim - 2)
    features = torch.randn(40, 2, generator=torch.Generator().manual_seed(1))
    learner.use_features(features)
    obs, bars = fill_windowed(learner, features)
    q = learner.act_values(obs, bars)
    assert q.shape == (3, len(Branch), max(branch_sizes()))
    before = [p.detach().clone() for p in learner.network.encoder.parameters()]
    for _ in range(3):
        learner.step(16)
    assert all(torch.isfinite(v) for v in learner.loss_values)
    assert any(not torch.equal(b, p) for b, p in zip(before, learner.network.encoder.parameters(), strict=True))
    with pytest.raises(ValueError, match="bar index"):
        learner.act_values(obs)


@pytest.mark.parametrize("encoder", ["attention", "scan"])
def test_the_compiled_update_with_a_window_encoder_matches_the_eager_one(kit, encoder: str) -> None:
    """``[learner] compile = true`` traces the window gather and the encoder inside the update's graphs."""
    torch._dynamo.reset()
    features = torch.randn(40, 2, generator=torch.Generator().manual_seed(1))
    runs = []
    for compiled in (False, True):
        learner = small_learner(kit, None, encoder=encoder, compile=compiled)
        learner.use_features(features)
        fill_windowed(learner, features)
        for _ in range(2):
            learner.step(16)
        runs.append(learner)
    torch._dynamo.reset()
    eager, compiled = runs
    for a, b in zip(eager.params, compiled.params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(eager.loss_values, compiled.loss_values, rtol=1e-4, atol=1e-6)


def test_the_default_learner_builds_todays_network(kit) -> None:
    """mlp adds no parameter, buffer or RNG draw: the same seed gives the same network as before encoders."""
    learner = small_learner(kit, None)
    assert learner.window == 1 and learner.input_dim == kit.obs_dim
    assert not any(name.startswith("encoder.") for name in learner.network.state_dict())
    assert learner.network.trunk[0].in_features == kit.obs_dim


# A tiny `foxhunt train` (TINY, one fold of one epoch, one intra-op thread, torch 2.13 on an x86-64 CPU) on the
# code before encoders existed (commit 857d013) gave a fold checkpoint whose SHA-256 later commits matched bit for
# bit on the machine that recorded it. A hash cannot travel between CPU models (each rounds its vector kernels its
# own way), so the pin is that run's content measured: per network tensor its float64 sum of absolute values, sum
# of squares and element count, and every ISV slot's values by name. It was taken, on this project's 2-core
# machine kind, from commit 92f7148, whose checkpoint hashed to 857d013's on the recording machine. Left out of
# the ISV: the layout's fingerprint and the slots of plugins added after 857d013 that declare a slot even when off
# (iql's support floor, expected_sarsa's temperature, the auxiliary tasks' weights, the quantile and horizon-value
# heads' weights, trade_plans' parameters and threshold) and the slots added since to older plugins (the support kernel's quantile knots, which the default
# even atom spacing never reads); they change the ISV's width, never a value the run computes. A relative 1e-5 leaves room for the machines' rounding (a few units in the last place of float32)
# and fails on a change to what the run computes: a learning rate 1 % off moves a statistic by 1.5e-4.
PINNED_DEFAULT_RUN = Path(__file__).with_name("pinned_default_run.json")
PIN_RELATIVE = 1e-5
SLOTS_NEWER_THAN_THE_PIN = {"iql", "expected_sarsa", "auxiliary", "quantiles", "horizon_values", "trade_plans", "vsn"}  # owners
SLOT_NAMES_NEWER_THAN_THE_PIN = {"support.knots"}  # slots of plugins older than the pin
ONE_EPOCH = (*TINY, "train.epochs=1", "folds.n_folds=1")
# The pinned run was recorded at the config classes' learning values and with rolling folds; the CPU profile has
# its own values since (the defaults study, docs/tune.md; the execution credit, docs/learner.md) and folds are
# anchored by default (docs/data.md, "Folds"), so the pinned runs name the values the defaults would replace.
CLASS_VALUES = ("learner.lr=3e-4", 'features.feature_set="horizons"', "plugins.mirror.fraction=0.25",
                "plugins.epsilon.decay_fraction=0.5", "learner.execution_regret=false", "learner.shaping_only=false",
                'folds.mode="rolling"')


def close_to_pin(value: float, pinned: float) -> bool:
    return math.isclose(value, pinned, rel_tol=PIN_RELATIVE, abs_tol=1e-12)


def differences_from_the_pin(path: Path) -> list[str]:
    """What in the run's fold checkpoint differs from PINNED_DEFAULT_RUN (an empty list: nothing)."""
    pin = json.loads(PINNED_DEFAULT_RUN.read_text(encoding="utf-8"))
    tensors = load_file(str(path / "checkpoints/fold_0/tensors.safetensors"))
    layout = json.loads((path / "checkpoints/fold_0/metadata.json").read_text(encoding="utf-8"))["isv"]
    found = []
    network = {name: tensor for name, tensor in tensors.items() if name != "isv"}
    if set(network) != set(pin["tensors"]):
        found.append(f"tensors {sorted(set(network) ^ set(pin['tensors']))} added or missing")
    for name in sorted(set(network) & set(pin["tensors"])):
        values, want = network[name].double(), pin["tensors"][name]
        measured = {"abs_sum": float(values.abs().sum()), "square_sum": float(values.square().sum()),
                    "elements": values.numel()}
        moved = {key: (measured[key], want[key]) for key in want if not close_to_pin(measured[key], want[key])}
        if moved:
            found.append(f"{name}: (now, pinned) {moved}")
    slots = {slot["name"]: slot for slot in layout["slots"]
             if slot["name"] != "isv.fingerprint" and slot["owner"] not in SLOTS_NEWER_THAN_THE_PIN
             and slot["name"] not in SLOT_NAMES_NEWER_THAN_THE_PIN}
    if set(slots) != set(pin["isv"]):
        found.append(f"ISV slots {sorted(set(slots) ^ set(pin['isv']))} added or missing")
    isv = tensors["isv"]
    for name in sorted(set(slots) & set(pin["isv"])):
        slot = slots[name]
        values = [float(v) for v in isv[slot["offset"]:slot["offset"] + slot["width"]]]
        if len(values) != len(pin["isv"][name]) or not all(map(close_to_pin, values, pin["isv"][name])):
            found.append(f"ISV slot {name}: now {values}, pinned {pin['isv'][name]}")
    return found


@pytest.fixture
def newer_plugins_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """iql and expected_sarsa discoverable, as an install from today's pyproject lists them (both off by default;
    their slots declared)."""
    real = importlib.metadata.entry_points
    points = [importlib.metadata.EntryPoint(name, module, ENTRY_POINT_GROUP)
              for name, module in (("iql", "foxhunt_plugins.losses.iql"),
                                   ("expected_sarsa", "foxhunt_plugins.expected_sarsa"))]

    def entry_points(**selection):
        found = real(**selection)
        if selection.get("group") != ENTRY_POINT_GROUP:
            return found
        names = {ep.name for ep in found}
        return [*found, *(point for point in points if point.name not in names)]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def default_run(out: Path, *overrides: str) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the pinned digest was recorded: a matmul's sums are split by thread
    try:
        result = invoke(*train_args(out, (*ONE_EPOCH, *CLASS_VALUES, *overrides)))
    finally:
        torch.set_num_threads(threads)
    assert result.exit_code == 0, result.output + result.stderr


def test_the_default_run_computes_what_it_did_before_encoders(newer_plugins_installed, tmp_path: Path) -> None:
    """Every tensor the run computes is 857d013's, with today's built-in plugins installed."""
    default_run(tmp_path / "run")
    assert differences_from_the_pin(tmp_path / "run") == []


def test_with_857d013s_plugins_enabled_the_run_is_the_same(newer_plugins_installed, tmp_path: Path) -> None:
    default_run(tmp_path / "run", 'plugins.disable=["iql", "expected_sarsa"]')
    assert differences_from_the_pin(tmp_path / "run") == []


@pytest.fixture
def window_encoders_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoder plugins discoverable through the entry-point group, as an installed foxhunt lists them."""
    real = importlib.metadata.entry_points
    points = [importlib.metadata.EntryPoint(module.NAME, module.__name__, ENTRY_POINT_GROUP)
              for module in (attention, scan)]

    def entry_points(**selection):
        found = real(**selection)
        if selection.get("group") != ENTRY_POINT_GROUP:
            return found
        names = {ep.name for ep in found}
        return [*found, *(point for point in points if point.name not in names)]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


@pytest.mark.parametrize("encoder", ["attention", "scan"])
def test_a_run_with_a_window_encoder_trains_saves_and_backtests_through_it(window_encoders_installed, encoder: str,
                                                                          tmp_path: Path) -> None:
    out = tmp_path / "run"
    overrides = (*ONE_EPOCH, f'learner.encoder="{encoder}"', f"plugins.{encoder}.window=4",
                 f"plugins.{encoder}.width=8")
    result = invoke(*train_args(out, overrides))
    assert result.exit_code == 0, result.output + result.stderr
    checkpoint = out / "checkpoints/fold_0"
    loaded = load_policy(checkpoint)
    try:
        assert loaded.policy.encoder.name == encoder and loaded.policy.window == 4
        assert loaded.policy.metadata["encoder"] == {"name": encoder, "window": 4}
        assert any(name.startswith("encoder.") for name in loaded.policy.network.state_dict())
    finally:
        loaded.host.close()
    outcome = backtest_checkpoint(checkpoint)  # acts through the window, on the recomputed features
    assert set(outcome.metrics) == {"agent", "buy_and_hold", "flat"}
    with pytest.raises(CheckpointError, match=rf"encoder '{encoder}' over 4 bars.*gives 8"):
        load_policy(checkpoint, plugins={encoder: {"window": 8}})
    assert_exports_act_through_the_window(checkpoint, tmp_path)


def assert_exports_act_through_the_window(checkpoint: Path, tmp_path: Path) -> None:
    """TorchScript exports take the encoder input (or raw window rows) and act as the loaded policy does."""
    loaded = load_policy(checkpoint)
    loaded.host.close()
    policy = loaded.policy
    g = torch.Generator().manual_seed(0)
    n_features, batch = policy.n_features, 5  # not the traced example's batch
    policy.use_features(torch.randn(50, n_features, generator=g))
    bars = torch.randint(0, 50, (batch,), generator=g)
    portfolio = torch.randn(batch, PortfolioObs.size(), generator=g)
    obs = torch.cat([policy.feature_matrix[bars], portfolio], 1)
    model_path, sidecar = export_policy(checkpoint, "torchscript", tmp_path / "model.pt")
    model = torch.jit.load(str(model_path))
    actions, _ = model(policy.encoder_input(obs, bars))
    assert torch.equal(actions, policy.greedy_actions(obs, bars))
    assert json.loads(sidecar.read_text())["encoder"]["window"] == policy.window
    raw_path, _ = export_policy(checkpoint, "torchscript", tmp_path / "raw.pt", inputs="raw")
    raw = torch.randn(batch, policy.window, n_features, generator=g, dtype=torch.float64)
    rows = torch.from_numpy(policy.normalizer.apply(raw.reshape(-1, n_features).numpy())).reshape(batch, -1)
    raw_actions, _ = torch.jit.load(str(raw_path))(raw.to(torch.float32), portfolio)
    observed, _ = model(torch.cat([rows.to(torch.float32), portfolio], 1))
    assert torch.equal(raw_actions, observed)


def test_an_unknown_encoder_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    result = invoke(*train_args(tmp_path / "run", (*ONE_EPOCH, 'learner.encoder="lstm"')))
    assert result.exit_code != 0
    assert "learner.encoder: 'lstm' is not an encoder" in result.output + result.stderr
