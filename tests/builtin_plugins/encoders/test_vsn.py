"""The variable selection network encoder against a float64 reference written variable by variable, its gradients,
its selection weights, which variables an input reaches, its settings and record, and a real run that selects it
through its entry point."""

from __future__ import annotations

import importlib.metadata
import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from trainer_testkit import TINY, invoke, train_args

from foxhunt.checkpoint_backtest import load_policy
from foxhunt.config import load_config
from foxhunt.contract import FeatureGroup
from foxhunt.features import FEATURE_GROUPS
from foxhunt.env.tables import PortfolioObs
from foxhunt.learner import BranchingNetwork, LearnerConfig
from foxhunt.plugin.host import ENTRY_POINT_GROUP
from foxhunt_plugins.encoders import vsn

ONE_EPOCH = (*TINY, "train.epochs=1", "folds.n_folds=1")


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    mean = x.mean()
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean() + 1e-5)


def grn_of(weights: dict[str, torch.Tensor], a: torch.Tensor) -> torch.Tensor:
    """One gated residual network on one vector (TFT eqs. 2-5), from its float64 weight matrices and biases."""
    def layer(name: str, x: torch.Tensor) -> torch.Tensor:
        return weights[f"{name}.weight"] @ x + weights[f"{name}.bias"]

    pre = layer("input_layer", a)
    eta2 = torch.where(pre > 0, pre, torch.exp(pre) - 1)  # ELU
    eta1 = layer("hidden_layer", eta2)
    glu = 1 / (1 + torch.exp(-layer("gate", eta1))) * layer("value", eta1)
    skip = layer("skip", a) if "skip.weight" in weights else a
    return layer_norm(skip + glu)


def parameters_of(module: torch.nn.Module, group: int | None = None) -> dict[str, torch.Tensor]:
    """``module``'s parameters in float64, each the ``group``-th member of a batched one when ``group`` is given."""
    return {name: (p if group is None else p[group]).detach().double() for name, p in module.named_parameters()}


def reference(encoder: vsn.VariableSelectionEncoder, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The output ``[B, width + P]`` and the selection weights ``[B, V]``, one sample and one variable at a time;
    with ISV context, its last ``context_width`` columns are one more variable after the portfolio."""
    f = encoder.n_features
    own = x.shape[1] - encoder.context_width  # the portfolio's columns end here, the context's begin
    embedding = parameters_of(encoder.feature_embedding)
    portfolio_map = parameters_of(encoder.portfolio_embedding)
    selection = parameters_of(encoder.selection)
    outputs, selections = [], []
    for sample in x.double():
        embedded = [embedding["weight"][j, :, 0] * sample[j] + embedding["bias"][j] for j in range(f)]
        embedded.append(portfolio_map["weight"] @ sample[f:own] + portfolio_map["bias"])
        if encoder.context_width:
            context_map = parameters_of(encoder.context_embedding)
            embedded.append(context_map["weight"] @ sample[own:] + context_map["bias"])
        processed = [grn_of(parameters_of(encoder.variable_grns, j), xi) for j, xi in enumerate(embedded)]
        logits = grn_of(selection, torch.cat(embedded))
        weights = torch.exp(logits) / torch.exp(logits).sum()
        total = sum(weights[j] * processed[j] for j in range(len(processed)))
        outputs.append(torch.cat([total, sample[f:]]))
        selections.append(weights)
    return torch.stack(outputs), torch.stack(selections)


def encoder_and_input(seed: int, n_features: int, portfolio: int, width: int, batch: int, context: int = 0):
    """The encoder and an input ``[batch, F + P + C]``: ``context`` ISV context columns after the portfolio."""
    torch.manual_seed(seed)
    encoder = vsn.build(n_features, portfolio + context, vsn.VsnSettings(width=width), context_width=context)
    x = torch.randn(batch, n_features + portfolio + context, generator=torch.Generator().manual_seed(seed + 1)) * 2
    return encoder, x


@given(seed=st.integers(0, 10_000), n_features=st.integers(1, 4), portfolio=st.integers(1, 3),
       width=st.integers(2, 5), batch=st.integers(1, 4), context=st.integers(0, 2))
def test_the_encoder_matches_a_float64_reference(seed: int, n_features: int, portfolio: int, width: int,
                                                  batch: int, context: int) -> None:
    encoder, x = encoder_and_input(seed, n_features, portfolio, width, batch, context)
    assert encoder.variables == n_features + 1 + (context > 0)
    expected, expected_weights = reference(encoder, x)
    got = encoder(x)
    assert got.shape == (batch, encoder.out_features) == (batch, width + portfolio + context)
    torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5)
    encoder.double()  # the same parameters in float64: the reference's arithmetic, to rounding
    torch.testing.assert_close(encoder(x.double()), expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(encoder.selection_weights(x.double()), expected_weights, rtol=1e-10, atol=1e-12)


@given(seed=st.integers(0, 10_000), n_features=st.integers(1, 5), portfolio=st.integers(1, 3),
       scale=st.floats(0.1, 100.0))
def test_selection_weights_are_a_distribution_over_the_variables(seed: int, n_features: int, portfolio: int,
                                                                 scale: float) -> None:
    encoder, x = encoder_and_input(seed, n_features, portfolio, 4, 6)
    with torch.no_grad():
        weights = encoder.selection_weights(x * scale)
    assert weights.shape == (6, n_features + 1) and encoder.variables == n_features + 1
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(6))
    # a layer norm's output as logits: no variable takes more than the bound the module docstring states
    s = math.sqrt(n_features)
    assert float(weights.max()) <= math.exp(s) / (math.exp(s) + n_features * math.exp(-1 / s)) + 1e-6


@given(seed=st.integers(0, 10_000), n_features=st.integers(1, 4), portfolio=st.integers(1, 3), data=st.data())
def test_changing_one_variable_changes_its_own_path_only(seed: int, n_features: int, portfolio: int, data) -> None:
    """A feature column reaches its own embedding and GRN only (then the selection, which reads every embedding);
    the portfolio columns reach the portfolio variable's and the appended columns; nothing else moves."""
    encoder, x = encoder_and_input(seed, n_features, portfolio, 3, 4)
    variable = data.draw(st.integers(0, n_features))  # n_features: the portfolio
    changed = x.clone()
    columns = slice(n_features, None) if variable == n_features else slice(variable, variable + 1)
    changed[:, columns] += 1.5
    with torch.no_grad():
        before, after = encoder.embed(x), encoder.embed(changed)
        processed_before, processed_after = encoder.variable_grns(before), encoder.variable_grns(after)
        out_before, out_after = encoder(x), encoder(changed)
    others = [j for j in range(n_features + 1) if j != variable]
    assert torch.equal(before[:, others], after[:, others])
    assert torch.equal(processed_before[:, others], processed_after[:, others])
    assert not torch.equal(before[:, variable], after[:, variable])
    assert not torch.equal(processed_before[:, variable], processed_after[:, variable])
    width = encoder.width
    appended_moved = not torch.equal(out_before[:, width:], out_after[:, width:])
    assert appended_moved == (variable == n_features)  # the raw portfolio columns, and only they


class SelectionWeights(torch.nn.Module):
    """The encoder's ``selection_weights`` as a module's forward (what ``functional_call`` calls)."""

    def __init__(self, encoder: vsn.VariableSelectionEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder.selection_weights(x)


def functional(module: torch.nn.Module):
    """``module``'s forward as a function of its input and its parameters, and the parameters (float64 leaves)."""
    names = [name for name, _ in module.named_parameters()]
    params = tuple(p.detach().double().clone().requires_grad_() for p in module.parameters())

    def call(x: torch.Tensor, *values: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(module, dict(zip(names, values, strict=True)), (x,))
    return call, params


@pytest.mark.parametrize("part", ["forward", "selection_weights"])
def test_the_encoder_passes_gradcheck_in_float64(part: str) -> None:
    torch.manual_seed(5)
    encoder = vsn.build(2, 2, vsn.VsnSettings(width=2)).double()
    call, params = functional(encoder if part == "forward" else SelectionWeights(encoder))
    x = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(call, (x, *params))


def test_the_per_variable_maps_are_batched_over_the_variables() -> None:
    """One weight tensor per layer with the variables as its leading dimension (no module per variable)."""
    encoder = vsn.build(5, 3, vsn.VsnSettings(width=4))
    assert encoder.feature_embedding.weight.shape == (5, 4, 1)
    for name in ("input_layer", "hidden_layer", "gate", "value"):
        assert getattr(encoder.variable_grns, name).weight.shape == (6, 4, 4)
    assert encoder.variable_grns.skip is None  # width -> width: the identity
    assert encoder.selection.skip.weight.shape == (6, 6 * 4)  # every embedding -> V logits


def test_settings_are_checked_naming_the_setting_and_the_value() -> None:
    with pytest.raises(ValueError, match=r"width must be an int >= 2 .*got 1"):
        vsn.VsnSettings(width=1)
    with pytest.raises(ValueError, match=r"width must be an int >= 2 .*got 2.5"):
        vsn.VsnSettings(width=2.5)
    with pytest.raises(ValueError, match="at least one portfolio column"):
        vsn.build(3, 0, vsn.VsnSettings())


def test_the_record_is_one_bar_and_builds_a_network_spectral_norm_can_bound() -> None:
    chosen = vsn.VsnSettings(width=8)
    (record,) = vsn.foxhunt_encoders(chosen)
    assert (record.name, record.window, record.settings) == ("vsn", 1, chosen)
    network = BranchingNetwork(3 + 2, LearnerConfig(hidden=(16,), head_hidden=8, n_atoms=5),
                               encoder=record.build(3, 2, record.settings))
    assert network.trunk[0].in_features == 8 + 2
    assert all(w.ndim in (2, 3) for w in network.weight_matrices())  # no vector among the bounded weights
    assert not [name for name, _ in network.named_buffers() if name.startswith("encoder.")]  # no state


def test_the_plugin_is_installed_under_its_entry_point() -> None:
    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert points.get("vsn") == vsn.__name__


def test_a_run_selects_the_encoder_by_name_and_its_checkpoint_gives_selection_weights(tmp_path: Path) -> None:
    """``[learner] encoder = "vsn"``: discovered through the installed entry point, trained, checkpointed; the
    saved policy's encoder gives one weight per feature column and one for the portfolio."""
    out = tmp_path / "run"
    result = invoke(*train_args(out, (*ONE_EPOCH, 'learner.encoder="vsn"', "plugins.vsn.width=8")))
    assert result.exit_code == 0, result.output + result.stderr
    loaded = load_policy(out / "checkpoints/fold_0")
    try:
        policy = loaded.policy
        assert policy.metadata["encoder"] == {"name": "vsn", "window": 1}
        encoder = policy.network.encoder
        assert isinstance(encoder, vsn.VariableSelectionEncoder) and encoder.width == 8
        assert encoder.out_features == 8 + PortfolioObs.size()
        obs = torch.randn(5, policy.n_features + PortfolioObs.size(), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            weights = encoder.selection_weights(obs)
        assert weights.shape == (5, policy.n_features + 1)
        torch.testing.assert_close(weights.sum(-1), torch.ones(5))
        names = policy.metadata["feature_set"]["names"]  # the run's feature columns, in order
        # the saved ISV holds the last epoch's per-group weights: the default inputs are all market columns
        groups = dict(zip(FeatureGroup.names(), policy.isv.view(vsn.GROUP_SELECTION).tolist(), strict=True))
    finally:
        loaded.host.close()
    # every epoch's metrics row names each variable's mean selection weight: one per feature, then the portfolio
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    selection = row["encoder"]
    assert set(selection) == {f"selection.{name}" for name in names} | {"selection.portfolio"}
    assert len(names) == policy.n_features
    assert all(0.0 < value < 1.0 for value in selection.values())
    assert math.isclose(sum(selection.values()), 1.0, rel_tol=1e-5)
    assert math.isclose(groups["MARKET"], sum(selection[f"selection.{name}"] for name in names), rel_tol=1e-4)
    assert math.isclose(groups["PORTFOLIO"], selection["selection.portfolio"], rel_tol=1e-4)
    assert groups["ORDER_FLOW"] == groups["BOOK"] == groups["MULTI_TIMEFRAME"] == 0.0
    # the plugin's monitor reads the slot, so the weights reach the health_diag log, Prometheus and the report
    (snapshot,) = [snapshot for snapshot in row["diagnostics"] if snapshot["name"] == "vsn.selection"]
    assert snapshot["values"]["vsn.group_selection[portfolio]"] == pytest.approx(groups["PORTFOLIO"], rel=1e-5)


def test_the_diagnostics_are_the_mean_selection_weight_of_each_named_variable() -> None:
    torch.manual_seed(2)
    encoder = vsn.build(3, 2, vsn.VsnSettings(width=4))
    (record,) = vsn.foxhunt_encoders(vsn.VsnSettings(width=4))
    x = torch.randn(64, 5)
    values = record.diagnostics(encoder, x, ("ret_1", "boll_256", "mom_32"))
    assert list(values) == ["selection.ret_1", "selection.boll_256", "selection.mom_32", "selection.portfolio"]
    with torch.no_grad():
        want = encoder.selection_weights(x).mean(0)
    torch.testing.assert_close(torch.tensor(list(values.values())), want)
    with pytest.raises(ValueError, match="4 variables, but 2 feature names"):
        record.diagnostics(encoder, x, ("ret_1", "boll_256"))


def test_with_isv_context_the_context_is_a_named_variable_and_group() -> None:
    torch.manual_seed(2)
    encoder = vsn.build(2, 3 + 2, vsn.VsnSettings(width=4), context_width=2)
    (record,) = vsn.foxhunt_encoders(vsn.VsnSettings(width=4))
    x = torch.randn(32, 7)
    values = record.diagnostics(encoder, x, ("ret_1", "ofi_16"))
    assert list(values) == ["selection.ret_1", "selection.ofi_16", "selection.portfolio", "selection.isv_context"]
    groups = record.slot_values(encoder, x, ("market", "order_flow"))[vsn.GROUP_SELECTION]
    torch.testing.assert_close(groups[FeatureGroup.ISV_CONTEXT], torch.tensor(values["selection.isv_context"]))
    with pytest.raises(ValueError, match="at least one portfolio column besides the 2 ISV context columns"):
        vsn.build(2, 2, vsn.VsnSettings(width=4), context_width=2)


@given(seed=st.integers(0, 10_000), groups=st.lists(st.sampled_from(FEATURE_GROUPS), min_size=1, max_size=6),
       batch=st.integers(1, 5), context=st.booleans())
def test_group_selection_is_each_groups_summed_weight_against_a_float64_loop(seed: int, groups: list[str],
                                                                           batch: int, context: bool) -> None:
    generator = torch.Generator().manual_seed(seed)
    tail = [FeatureGroup.PORTFOLIO, *([FeatureGroup.ISV_CONTEXT] if context else [])]
    weights = torch.softmax(torch.randn(batch, len(groups) + len(tail), generator=generator, dtype=torch.float64), -1)
    got = vsn.group_selection(weights.float(), tuple(groups), context=context)
    want = [0.0] * FeatureGroup.size()
    for sample in weights.tolist():
        for j, value in enumerate(sample):
            group = FeatureGroup[groups[j].upper()] if j < len(groups) else tail[j - len(groups)]
            want[group] += value / batch
    torch.testing.assert_close(got.double(), torch.tensor(want, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    assert math.isclose(float(got.sum()), 1.0, rel_tol=1e-5)


def test_the_record_writes_its_declared_slot_and_a_mismatch_is_named() -> None:
    (record,) = vsn.foxhunt_encoders(vsn.VsnSettings(width=4))
    assert record.writes == (vsn.GROUP_SELECTION,)
    encoder = vsn.build(2, 3, vsn.VsnSettings(width=4))
    values = record.slot_values(encoder, torch.randn(8, 5), ("market", "order_flow"))
    assert set(values) == {vsn.GROUP_SELECTION} and values[vsn.GROUP_SELECTION].shape == (FeatureGroup.size(),)
    with pytest.raises(ValueError, match="3 variables, but 1 feature groups"):
        record.slot_values(encoder, torch.randn(8, 5), ("market",))


def test_the_monitor_is_there_only_when_vsn_is_the_encoder() -> None:
    assert [m.name for m in vsn.foxhunt_monitors(load_config(None, ['learner.encoder="vsn"']))] == ["vsn.selection"]
    assert vsn.foxhunt_monitors(load_config(None, [])) == []


def test_a_bad_setting_stops_the_run_naming_it(tmp_path: Path) -> None:
    result = invoke(*train_args(tmp_path / "run", (*ONE_EPOCH, 'learner.encoder="vsn"', "plugins.vsn.width=0")))
    assert result.exit_code != 0
    assert "[plugins.vsn]: width must be an int >= 2" in result.output + result.stderr
    assert not (tmp_path / "run").exists()  # refused before the run directory
