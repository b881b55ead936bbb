"""The auxiliary-task plugin: the next-bar-return and regime losses against float64 loops on a learner's inputs
(their ISV weights included), the regime labels at their thresholds, off by default, its settings, budgets,
where its gradient goes, the mirror negating its targets, conformance, and a tiny `foxhunt train` run."""

from __future__ import annotations

import math
import unittest

import attrs
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_run import train_tiny

from foxhunt import AugmentationFold, AugmentationInputs
from foxhunt.actions import BRANCH_TABLES, Branch, Direction
from foxhunt.config import load_config
from foxhunt.env.tables import EP
from foxhunt.errors import BudgetError, PluginError
from foxhunt.learner import Batch, LearnerConfig, Replay, ReplayConfig
from foxhunt.testing import conformance_machine
from foxhunt_plugins.augmentations import mirror
from foxhunt_plugins.losses import auxiliary

BUDGETS = {"c51": 0.3, auxiliary.RETURN: 0.05, auxiliary.REGIME: 0.05}  # c51 gives each task a twentieth
BARS, THRESHOLD = 3, 0.5
ON = {"auxiliary": {"enabled": True, "regime_bars": BARS, "regime_threshold": THRESHOLD}}
N_BARS, START, STOP = 60, 5, 45  # the price path and the fold's training window inside it


def learner_with_targets(make_learner, seed: int = 0):
    """A float64 learner with the plugin on, its replay holding transitions whose obs[:, 0] is their stored bar
    (some outside the window, so partly masked), the fold's table from a random price path; and that path."""
    learner = make_learner(extra=[(auxiliary, "auxiliary")], settings=ON, budgets=BUDGETS, dtype=torch.float64, fill=0)
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, N_BARS)))
    learner.use_future_returns(close, START, STOP)
    g = torch.Generator().manual_seed(seed)
    n_envs, obs_dim = learner.replay.n_envs, learner.obs_dim
    for _ in range(40):
        bars = torch.randint(0, N_BARS, (n_envs,), generator=g)
        obs = torch.randn(n_envs, obs_dim, generator=g, dtype=torch.float64)
        obs[:, 0] = bars.double()
        actions = torch.zeros(n_envs, len(Branch), dtype=torch.int64)
        learner.replay.add(obs, actions, torch.randn(n_envs, generator=g, dtype=torch.float64), obs,
                           torch.zeros(n_envs, dtype=torch.float64), bars=bars)
    return learner, close


def reference_returns(close: np.ndarray, bar: int, horizon: int) -> tuple[list[float], list[float]]:
    """Float64: the standardised next log-returns of ``bar`` and their mask inside [START, STOP)."""
    inside = [math.log(close[t + 1] / close[t]) for t in range(START, STOP - 1)]
    mean = sum(inside) / len(inside)
    sigma = math.sqrt(sum((r - mean) ** 2 for r in inside) / len(inside))
    returns, valid = [], []
    for h in range(horizon):
        known = START <= bar and bar + h + 1 < STOP
        valid.append(1.0 if known else 0.0)
        returns.append(math.log(close[bar + h + 1] / close[bar + h]) / sigma if known else 0.0)
    return returns, valid


def reference_class(total: float, threshold: float) -> int:
    if total <= -threshold:
        return auxiliary.Regime.DOWN
    return auxiliary.Regime.UP if total > threshold else auxiliary.Regime.FLAT


def component(learner, name: str):
    return next(c for c in learner.components if c.name == name)


def test_the_return_loss_against_a_float64_loop(make_learner) -> None:
    learner, close = learner_with_targets(make_learner)
    inputs = learner.loss_inputs(learner.sample(32))
    bars = inputs.batch.obs[:, 0].long().tolist()
    prediction = inputs.online.auxiliary[:, slice(*learner.auxiliary.columns[auxiliary.RETURN])][:, 0].tolist()
    weights = inputs.batch.weights.tolist()
    total, masked = 0.0, 0
    for i, bar in enumerate(bars):
        (target,), (valid,) = reference_returns(close, bar, 1)
        masked += valid == 0.0
        total += weights[i] * 0.5 * valid * (prediction[i] - target) ** 2
    expected = total / len(bars)
    assert 0 < masked < len(bars)  # the draw holds both targets and masked samples
    loss = component(learner, auxiliary.RETURN).loss(inputs)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)  # the table is float32
    assert float(auxiliary.return_loss(inputs).detach()) == float(loss.detach())
    # its weight is read from the ISV at each call: 0.5 halves it
    inputs.slot(auxiliary.RETURN_WEIGHT).fill_(0.5)
    halved = component(learner, auxiliary.RETURN).loss(inputs)
    assert float(halved.detach()) == pytest.approx(0.5 * float(loss.detach()), rel=1e-12)


def test_the_regime_loss_against_a_float64_loop(make_learner) -> None:
    learner, close = learner_with_targets(make_learner, seed=1)
    inputs = learner.loss_inputs(learner.sample(32))
    bars = inputs.batch.obs[:, 0].long().tolist()
    logits = inputs.online.auxiliary[:, slice(*learner.auxiliary.columns[auxiliary.REGIME])].tolist()
    weights = inputs.batch.weights.tolist()
    total, known_count, classes = 0.0, 0, set()
    for i, bar in enumerate(bars):
        returns, valid = reference_returns(close, bar, BARS)
        known = math.prod(valid)
        if known:
            known_count += 1
            label = reference_class(sum(returns) / math.sqrt(BARS), THRESHOLD)
            classes.add(label)
            top = max(logits[i])
            log_sum = top + math.log(sum(math.exp(v - top) for v in logits[i]))
            total += weights[i] * (log_sum - logits[i][label])
    expected = total / len(bars)
    assert 0 < known_count < len(bars) and len(classes) >= 2  # masked samples and more than one class drawn
    loss = component(learner, auxiliary.REGIME).loss(inputs)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-9)
    assert float(auxiliary.regime_loss(inputs, BARS, THRESHOLD).detach()) == float(loss.detach())
    return_before = float(component(learner, auxiliary.RETURN).loss(inputs).detach())
    inputs.slot(auxiliary.REGIME_WEIGHT).fill_(0.5)
    halved = component(learner, auxiliary.REGIME).loss(inputs)
    assert float(halved.detach()) == pytest.approx(0.5 * float(loss.detach()), rel=1e-12)
    # the return task's weight is its own
    assert float(component(learner, auxiliary.RETURN).loss(inputs).detach()) == return_before > 0.0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bars=st.integers(1, 6), threshold=st.floats(0.05, 2.0))
def test_regime_labels_against_a_float64_loop(seed: int, bars: int, threshold: float) -> None:
    g = torch.Generator().manual_seed(seed)
    horizon = bars + 2  # the columns past `bars` are never read
    returns = torch.randn(40, horizon, generator=g, dtype=torch.float64) * threshold
    valid = (torch.rand(40, horizon, generator=g) < 0.85).double()
    classes, known = auxiliary.regime_labels(returns, valid, bars, threshold)
    assert classes.dtype == torch.int64 and classes.shape == known.shape == (40,)
    for i in range(40):
        total = sum(returns[i, :bars].tolist()) / math.sqrt(bars)
        assert int(classes[i]) == reference_class(total, threshold)
        assert float(known[i]) == math.prod(valid[i, :bars].tolist())


def test_regime_labels_at_their_thresholds() -> None:
    """DOWN at -threshold and below, UP only above +threshold, FLAT between and at +threshold (exact sums)."""
    t = 0.43
    returns = torch.tensor([[t, t, 0.0, 0.0], [-t, -t, 0.0, 0.0], [t, t, 1e-9, 0.0], [-t, -t, 1e-9, 0.0],
                            [0.0, 0.0, 0.0, 0.0], [5.0, 0.0, 0.0, 0.0], [-5.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    valid = torch.ones_like(returns)
    valid[6, 3] = 0.0
    classes, known = auxiliary.regime_labels(returns, valid, 4, t)  # √4 = 2: s = Σ / 2 exactly
    R = auxiliary.Regime
    assert classes.tolist() == [R.FLAT, R.DOWN, R.UP, R.FLAT, R.FLAT, R.UP, R.DOWN]
    assert known.tolist() == [1, 1, 1, 1, 1, 1, 0]
    # one bar: s is the return itself
    classes, _ = auxiliary.regime_labels(torch.tensor([[t], [-t], [-t + 1e-12]], dtype=torch.float64),
                                         torch.ones(3, 1, dtype=torch.float64), 1, t)
    assert classes.tolist() == [R.FLAT, R.DOWN, R.FLAT]


def test_off_by_default_no_component_no_head(kit, make_learner) -> None:
    from learner_builders import LOSS_MODULES

    host, registries = kit.frozen_host(extra=[(auxiliary, "auxiliary")])
    assert [c.name for c in host.loss_components(LearnerConfig())] == [m.NAME for m in LOSS_MODULES]
    learner = make_learner(extra=[(auxiliary, "auxiliary")])
    assert learner.network.auxiliary_out is None and learner.future_horizon == 0
    assert learner.sample(8).future_returns is None
    assert not any(name.startswith("auxiliary_") for name, _ in learner.network.named_parameters())
    # its slots are declared either way: a layout depends on the code alone, so switching it on keeps the fingerprint
    on = kit.frozen_host(extra=[(auxiliary, "auxiliary")], settings=ON)[1].layout
    for name in (auxiliary.RETURN_WEIGHT, auxiliary.REGIME_WEIGHT):
        assert name in registries.layout.offsets and name in on.offsets
    assert registries.layout.fingerprint_hex == on.fingerprint_hex


def test_switched_on_its_components_slots_and_head(kit, make_learner) -> None:
    section = {"enabled": True, "return_weight": 0.25, "regime_weight": 2.0, "regime_bars": 7}
    host, registries = kit.frozen_host(extra=[(auxiliary, "auxiliary")], settings={"auxiliary": section})
    for name, init in ((auxiliary.RETURN_WEIGHT, 0.25), (auxiliary.REGIME_WEIGHT, 2.0)):
        slot = registries.layout.slot(name)
        assert (slot.width, slot.owner, slot.init) == (1, "auxiliary", init)
    found = [c for c in host.loss_components(LearnerConfig()) if c.name.startswith("aux_")]
    assert [(c.name, c.budget, c.reads, c.auxiliary.outputs, c.auxiliary.horizon) for c in found] == [
        (auxiliary.RETURN, 0.05, (auxiliary.RETURN_WEIGHT,), 1, 1),
        (auxiliary.REGIME, 0.05, (auxiliary.REGIME_WEIGHT,), auxiliary.Regime.size(), 7)]
    learner = make_learner(extra=[(auxiliary, "auxiliary")], settings={"auxiliary": section}, budgets=BUDGETS)
    assert dict(learner.auxiliary.columns) == {auxiliary.RETURN: (0, 1), auxiliary.REGIME: (1, 4)}
    assert learner.future_horizon == 7 and learner.network.auxiliary_out.out_features == 4
    assert learner.sample(8).future_returns.shape == (8, 7)
    assert float(learner.isv.tensor[registries.layout.span(auxiliary.RETURN_WEIGHT)]) == 0.25


def test_only_the_return_task(kit, make_learner) -> None:
    section = {"auxiliary": {"enabled": True, "tasks": ["return"]}}
    host, _ = kit.frozen_host(extra=[(auxiliary, "auxiliary")], settings=section)
    assert [c.name for c in host.loss_components(LearnerConfig()) if c.name.startswith("aux_")] == [auxiliary.RETURN]
    learner = make_learner(extra=[(auxiliary, "auxiliary")], settings=section,
                           budgets={"c51": 0.3, auxiliary.RETURN: 0.1})
    assert (learner.auxiliary.outputs, learner.future_horizon) == (1, 1)


@pytest.mark.parametrize(("section", "match"), [
    ({"tasks": ["return", "volatility"]}, "tasks"), ({"tasks": []}, "tasks"),
    ({"tasks": ["return", "return"]}, "tasks"),
    ({"return_weight": -0.1}, "return_weight"), ({"regime_weight": -1.0}, "regime_weight"),
    ({"regime_threshold": 0.0}, "regime_threshold"), ({"regime_bars": 0}, "regime_bars"),
])
def test_bad_settings_are_refused(kit, section: dict, match: str) -> None:
    with pytest.raises(PluginError, match=match):
        kit.frozen_host(extra=[(auxiliary, "auxiliary")], settings={"auxiliary": {"enabled": True, **section}})


def test_switched_on_the_budgets_must_still_sum_to_one(make_learner) -> None:
    with pytest.raises(BudgetError, match=r"aux_return=0.05 \+ aux_regime=0.05 = 1.1"):
        make_learner(extra=[(auxiliary, "auxiliary")], settings=ON)
    learner = make_learner(extra=[(auxiliary, "auxiliary")], settings=ON, budgets=BUDGETS)
    budgets = dict(zip([c.name for c in learner.components], learner.budgets, strict=True))
    assert (budgets[auxiliary.RETURN], budgets[auxiliary.REGIME], budgets["c51"]) == (0.05, 0.05, 0.3)


def test_its_gradient_reaches_only_the_trunk_and_the_auxiliary_head(make_learner) -> None:
    learner, _ = learner_with_targets(make_learner, seed=2)
    inputs = learner.loss_inputs(learner.sample(32))
    names = [name for name, _ in learner.network.named_parameters()]
    allowed = {name for name in names if name.startswith(("trunk.", "encoder.", "auxiliary_"))}
    for name in (auxiliary.RETURN, auxiliary.REGIME):
        grads = torch.autograd.grad(component(learner, name).loss(inputs), learner.params, allow_unused=True,
                                    retain_graph=True)
        reached = {n for n, grad in zip(names, grads, strict=True) if grad is not None and bool(grad.abs().sum() > 0)}
        assert reached <= allowed, name
        # the head and the trunk under it do learn from it
        assert {"auxiliary_out.weight", "auxiliary_hidden.weight"} <= reached, name
        assert any(n.startswith("trunk.") for n in reached), name


# -- the mirror ------------------------------------------------------------------------------------------------------
SMALL = {"scale": np.array([-1.0, 1.0]), "shift": np.array([0.5, 0.0]), "low": np.array([-2.0, -np.inf]),
         "high": np.array([2.0, np.inf])}
FOLD = AugmentationFold(("ret_1",), None, np.zeros(len(EP)))


def action_map() -> dict:
    """The mirror's action map (SHORT and LONG swapped in the direction column); SMALL is its observation map."""
    swapped = {Direction.SHORT: Direction.LONG, Direction.LONG: Direction.SHORT}
    width = max(table.size() for table in BRANCH_TABLES.values())
    return {"codes": np.array([swapped.get(c, c) for c in range(width)]),
            "columns": np.arange(len(Branch)) == Branch.DIRECTION}


def test_the_mirror_negates_future_returns_at_the_selected_positions() -> None:
    (record,) = mirror.foxhunt_replay_augmentations(None, mirror.MirrorSettings(fraction=0.5))
    record = attrs.evolve(record, prepare=lambda fold: {**action_map(), **SMALL})

    def replay_with(records):
        return Replay(ReplayConfig(capacity=60), obs_dim=2, n_envs=3, n_step=1, device="cpu",
                      generator=torch.Generator().manual_seed(4), augmentations=records, horizon=3)

    plain, mirroring = replay_with(()), replay_with([record])
    g = torch.Generator().manual_seed(2)
    for _ in range(20):
        obs, bars = torch.randn(3, 2, generator=g), torch.randint(0, 30, (3,), generator=g)
        actions = torch.zeros(3, len(Branch), dtype=torch.int64)
        for replay in (plain, mirroring):
            replay.add(obs, actions, torch.randn(3, generator=g), obs, torch.zeros(3), bars=bars)
    table = torch.randn(30, 3, generator=g)
    valid = (torch.rand(30, 3, generator=g) < 0.8).float()
    for replay in (plain, mirroring):
        replay.set_future_returns(table, valid)
    mirroring.set_fold(FOLD)
    uniforms = torch.rand(16, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    gamma = torch.full((len(Branch),), 0.9)
    original, flipped = plain.sample_at(uniforms, gamma), mirroring.sample_at(uniforms, gamma)
    odd, even = torch.arange(1, 16, 2), torch.arange(0, 16, 2)  # fraction 0.5: every second position
    assert original.future_returns[odd].any()
    assert torch.equal(flipped.future_returns[odd], -original.future_returns[odd])
    assert torch.equal(flipped.future_returns[even], original.future_returns[even])
    assert torch.equal(flipped.future_valid, original.future_valid)
    assert not torch.equal(flipped.obs[odd], original.obs[odd])  # it did mirror those positions


def test_the_mirror_leaves_a_batch_without_future_returns_alone() -> None:
    batch = Batch(obs=torch.randn(4, 2), actions=torch.zeros(4, len(Branch), dtype=torch.int64),
                  returns=torch.zeros(4, len(Branch)), discounts=torch.ones(4, len(Branch)),
                  next_obs=torch.randn(4, 2), weights=torch.ones(4), indices=torch.arange(4))
    tensors = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in SMALL.items()}
    tensors.update({k: torch.as_tensor(v) for k, v in action_map().items()})
    out = mirror.mirror_batch(AugmentationInputs(batch, torch.ones(4, 1, dtype=torch.bool), torch.zeros(4), tensors))
    assert out.future_returns is None and out.future_valid is None


# -- conformance and a run -------------------------------------------------------------------------------------------
def test_the_opt_in_plugin_passes_conformance_switched_on() -> None:
    """Its weight slots, their state entries and the learner's auxiliary head, through resets and checkpoints."""
    quick = settings(max_examples=4, stateful_step_count=6, deadline=None, database=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])
    enabled = load_config(None, ["plugins.auxiliary.enabled=true"])
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(
        conformance_machine(auxiliary, "auxiliary", enabled, test_settings=quick)).run(result)
    assert result.testsRun == 1
    assert "\n".join(text for _, text in result.failures + result.errors) == ""


def test_a_tiny_run_with_it_switched_on_trains_saves_and_backtests_its_fold(tmp_path, monkeypatch) -> None:
    """Through `foxhunt train`: both losses in metrics.jsonl, the fold checkpoint with the auxiliary head saved,
    loaded and backtested on the test window."""
    import json

    from safetensors.torch import load_file

    from foxhunt.checkpoint import TENSORS_FILE

    out = train_tiny(tmp_path, monkeypatch, "--set", "plugins.auxiliary.enabled=true",
                     "--set", "learner.budgets.c51=0.3", "--set", "learner.budgets.aux_return=0.05",
                     "--set", "learner.budgets.aux_regime=0.05")
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["budgets"][auxiliary.RETURN] == 0.05 and row["budgets"][auxiliary.REGIME] == 0.05
    for name in (auxiliary.RETURN, auxiliary.REGIME):
        # > 0: the targets were gathered by the stored bars (all masked would give exactly 0)
        assert row["losses"][name] > 0.0 and row["grad_norms"][name] > 0.0, name
    fold = json.loads((out / "summary.json").read_text())["folds"][0]
    assert "agent" in fold["test"]  # the saved checkpoint (auxiliary head and all) was loaded and backtested
    saved = load_file(out / "checkpoints" / "fold_0" / TENSORS_FILE)
    assert saved["learner.network.auxiliary_out.bias"].shape == (1 + auxiliary.Regime.size(),)
