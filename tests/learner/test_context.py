"""ISV context (foxhunt.learner.context, [learner] isv_context): ISV slots the network reads as inputs, live."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from learner_builders import OBS_DIM, assert_update_middle_compiles
from tiny_run import train_tiny

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.errors import LayoutError
from foxhunt.learner import LearnerConfig
from foxhunt_plugins.adaptive import support

CONTEXT = (contract.SUPPORT_HALF_WIDTH, contract.SUPPORT_CENTER)  # 4 + 4 lanes, in this order


def context_learner(make_learner, names=CONTEXT, **changes):
    return make_learner(extra=[(support, "support")], isv_context=names, dtype=torch.float64, **changes)


def test_the_default_appends_nothing_and_bad_names_are_refused(make_learner) -> None:
    assert LearnerConfig().isv_context == ()
    learner = make_learner(extra=[(support, "support")])
    assert learner.network.context is None and learner.input_dim == OBS_DIM
    for names in ([contract.SUPPORT_CENTER, contract.SUPPORT_CENTER], [""]):
        with pytest.raises(ValueError, match="isv_context"):
            LearnerConfig(isv_context=names)
    with pytest.raises(LayoutError, match=r"isv_context.*'no.such_slot'.*declared slots: .*support.center"):
        context_learner(make_learner, names=("support.center", "no.such_slot"))


def test_the_encoder_input_ends_with_the_live_slots_in_the_order_named(make_learner) -> None:
    learner = context_learner(make_learner)
    assert learner.input_dim == OBS_DIM + 2 * len(Branch)
    half, center = torch.arange(1.0, 5.0), torch.arange(-4.0, 0.0)
    learner.isv.write(contract.SUPPORT_HALF_WIDTH, half)
    learner.isv.write(contract.SUPPORT_CENTER, center)
    obs = torch.randn(3, OBS_DIM, dtype=torch.float64)
    encoder_input = learner.network.encoder_input(obs)
    assert encoder_input.shape == (3, OBS_DIM + 8)
    torch.testing.assert_close(encoder_input[:, :OBS_DIM], obs, rtol=0.0, atol=0.0)
    torch.testing.assert_close(encoder_input[:, OBS_DIM:], torch.cat([half, center]).double().expand(3, 8),
                               rtol=0.0, atol=0.0)


def test_online_and_target_networks_read_the_slots_at_every_forward(make_learner) -> None:
    """The values are read live, not copied at construction, and the target network (a deep copy) reads the same
    lanes: a write to the slot changes both networks' Q of the same observations."""
    learner = context_learner(make_learner)
    assert learner.target.context is learner.network.context
    assert copy.deepcopy(learner.network).context is learner.network.context
    obs = torch.randn(5, OBS_DIM, dtype=torch.float64)
    support_atoms = learner.support()
    before = [net.expected_q(obs, support_atoms) for net in (learner.network, learner.target)]
    learner.isv.write(contract.SUPPORT_CENTER, torch.full((len(Branch),), 3.0))
    after = [net.expected_q(obs, support_atoms) for net in (learner.network, learner.target)]
    for old, new in zip(before, after, strict=True):
        finite = torch.isfinite(old)
        assert not torch.allclose(old[finite], new[finite])


def test_an_update_with_context_runs_and_compiles(make_learner) -> None:
    learner = context_learner(make_learner)
    learner.update(learner.sample())
    assert torch.isfinite(learner.loss_values).all()
    assert_update_middle_compiles(context_learner(make_learner))


def test_a_tiny_run_gives_vsn_a_context_variable_and_the_saved_policy_reads_its_own_isv(tmp_path, monkeypatch) -> None:
    """Through `foxhunt train` with the vsn encoder: the context is a variable with its own selection weight (in
    metrics.jsonl and the ISV_CONTEXT lane of vsn.group_selection); the saved policy, loaded as `foxhunt
    backtest` loads it, reads the context from the ISV it was saved with; its TorchScript export carries those
    values and acts as it does."""
    from foxhunt.checkpoint_backtest import load_policy
    from foxhunt.env.tables import PortfolioObs
    from foxhunt.policy_export import export_policy

    names = '["health.value","epsilon.branch"]'
    out = train_tiny(tmp_path, monkeypatch, "--set", 'learner.encoder="vsn"', "--set", f"learner.isv_context={names}")
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    weights = row["encoder"]
    assert 0.0 < weights["selection.isv_context"] < 1.0
    assert sum(value for name, value in weights.items() if name.startswith("selection.")) == pytest.approx(1.0)
    assert "agent" in json.loads((out / "summary.json").read_text())["folds"][0]["test"]
    loaded = load_policy(out / "checkpoints" / "fold_0")
    try:
        policy = loaded.policy
        groups = policy.isv.view(contract.VSN_GROUP_SELECTION)
        assert float(groups[contract.FeatureGroup.ISV_CONTEXT]) > 0.0
        context = policy.network.context
        assert context is not None and context.isv is policy.isv.tensor and context.width == 1 + len(Branch)
        saved = torch.cat([policy.isv.view(contract.HEALTH), policy.isv.view(contract.EPSILON)])
        torch.testing.assert_close(context(), saved, rtol=0.0, atol=0.0)
        model_path, _ = export_policy(out / "checkpoints" / "fold_0", "torchscript", tmp_path / "policy.pt",
                                      "observation")
        model = torch.jit.load(str(model_path))
        obs = torch.randn(7, policy.n_features + PortfolioObs.size(), generator=torch.Generator().manual_seed(3))
        _, q_values = model(obs)
        expected = policy.act_values(obs)
        real = torch.isfinite(expected)
        torch.testing.assert_close(q_values[real], expected[real], rtol=0.0, atol=1e-5)
    finally:
        loaded.host.close()


@pytest.mark.parametrize("name", ["attention", "scan"])
def test_a_window_encoder_reads_the_context_after_the_portfolio(name: str) -> None:
    """Encoders that do not take ``context_width`` read the lanes as more non-window columns: the learner acts and
    updates on windows with them, and a write to the slot changes what it acts on."""
    from learner_builders import N_ENVS, frozen_host, small_config

    from foxhunt.isv import ISV
    from foxhunt.learner import Learner
    from foxhunt_plugins.encoders import attention, scan

    host, registries = frozen_host(extra=[(support, "support"), (attention, attention.NAME), (scan, scan.NAME)],
                                   settings={"attention": {"window": 3, "width": 8, "heads": 2},
                                             "scan": {"window": 3, "width": 8, "state": 4, "heads": 2}})
    # the knots, which an even spacing never reads: a write to them changes the Q only through the context
    config = small_config(encoder=name, isv_context=(contract.SUPPORT_KNOTS,))
    learner = Learner(config, registries.layout, ISV(registries.layout, "cpu"), host.loss_components(config), OBS_DIM,
                      "cpu", 0, n_envs=N_ENVS, encoders=host.encoders(config), n_features=2)
    assert learner.input_dim == 3 * 2 + (OBS_DIM - 2) + len(Branch) * contract.AtomKnot.size()
    generator = torch.Generator().manual_seed(4)
    features = torch.randn(40, 2, generator=generator)
    learner.use_features(features)
    for step in range(20):
        bars = torch.tensor([step + 5 * env for env in range(N_ENVS)])
        obs = torch.cat([features[bars], torch.randn(N_ENVS, OBS_DIM - 2, generator=generator)], 1)
        next_obs = torch.cat([features[bars + 1], torch.randn(N_ENVS, OBS_DIM - 2, generator=generator)], 1)
        actions = torch.zeros(N_ENVS, len(Branch), dtype=torch.int64)
        learner.replay.add(obs, actions, torch.randn(N_ENVS, generator=generator), next_obs, torch.zeros(N_ENVS),
                           bars, bars + 1)
    learner.step(16)
    assert torch.isfinite(learner.loss_values).all()
    before = learner.act_values(obs, bars)
    support_before = learner.support()
    learner.isv.write(contract.SUPPORT_KNOTS, torch.full((len(Branch) * contract.AtomKnot.size(),), 0.3))
    torch.testing.assert_close(learner.support(), support_before, rtol=0.0, atol=0.0)
    after = learner.act_values(obs, bars)
    finite = torch.isfinite(before)
    assert not torch.allclose(before[finite], after[finite])
