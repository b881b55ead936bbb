"""The gated residual network encoder against a float64 reference written sample by sample and block by block,
its gradients, its settings and record, and a real run that selects it through its entry point."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from trainer_testkit import TINY, invoke, train_args

from foxhunt.checkpoint_backtest import load_policy
from foxhunt.learner import BranchingNetwork, LearnerConfig
from foxhunt.plugin.host import ENTRY_POINT_GROUP
from foxhunt_plugins.encoders import grn

ONE_EPOCH = (*TINY, "train.epochs=1", "folds.n_folds=1")


def elu(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x, torch.exp(x) - 1)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    return 1 / (1 + torch.exp(-x))


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    mean = x.mean()
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean() + 1e-5)


def affine(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return layer.weight.double() @ x + layer.bias.double()


def reference_block(block: torch.nn.Module, a: torch.Tensor) -> torch.Tensor:
    """One GRN on one sample ``a [in]``, the paper's equations 2-5 in float64."""
    eta2 = elu(affine(block.input_layer, a))
    eta1 = affine(block.hidden_layer, eta2)
    glu = sigmoid(affine(block.gate, eta1)) * affine(block.value, eta1)
    skip = a if a.shape[0] == block.out_features else affine(block.skip, a)
    return layer_norm(skip + glu)


def reference(encoder: grn.GrnEncoder, x: torch.Tensor) -> torch.Tensor:
    """The encoder on a batch ``x [B, F + P]``, one sample and one block at a time."""
    rows = []
    for sample in x.double():
        h = sample
        for block in encoder.blocks:
            h = reference_block(block, h)
        rows.append(h)
    return torch.stack(rows)


@given(seed=st.integers(0, 10_000), n_features=st.integers(1, 4), portfolio=st.integers(1, 3),
       width=st.integers(2, 6), layers=st.integers(1, 3), batch=st.integers(1, 4))
def test_the_encoder_matches_a_float64_reference(seed: int, n_features: int, portfolio: int, width: int,
                                                  layers: int, batch: int) -> None:
    torch.manual_seed(seed)
    encoder = grn.build(n_features, portfolio, grn.GrnSettings(width=width, layers=layers))
    x = torch.randn(batch, n_features + portfolio, generator=torch.Generator().manual_seed(seed + 1)) * 2
    got = encoder(x)
    assert got.shape == (batch, encoder.out_features) == (batch, width)
    torch.testing.assert_close(got.double(), reference(encoder, x), rtol=1e-4, atol=1e-5)
    encoder.double()  # the same parameters in float64: the reference's arithmetic, to rounding
    torch.testing.assert_close(encoder(x.double()), reference(encoder, x), rtol=1e-10, atol=1e-12)


def test_a_block_whose_width_is_its_input_width_has_no_skip_map() -> None:
    encoder = grn.build(3, 1, grn.GrnSettings(width=4, layers=2))
    assert encoder.blocks[0].skip is None and encoder.blocks[1].skip is None  # 3 + 1 = 4 wide throughout
    encoder = grn.build(3, 2, grn.GrnSettings(width=4, layers=2))
    assert encoder.blocks[0].skip is not None and encoder.blocks[1].skip is None


def functional(module: torch.nn.Module):
    """``module``'s forward as a function of its input and its parameters, and the parameters (float64 leaves)."""
    names = [name for name, _ in module.named_parameters()]
    params = tuple(p.detach().double().clone().requires_grad_() for p in module.parameters())

    def call(x: torch.Tensor, *values: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(module, dict(zip(names, values, strict=True)), (x,))
    return call, params


def test_the_encoder_passes_gradcheck_in_float64() -> None:
    torch.manual_seed(3)
    encoder = grn.build(2, 2, grn.GrnSettings(width=3, layers=2)).double()
    call, params = functional(encoder)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(call, (x, *params))


def test_the_grouped_block_is_its_groups_side_by_side() -> None:
    """G batched GRNs (what the vsn encoder uses) are G separate ones: group ``g`` reads only its own input."""
    torch.manual_seed(4)
    block = grn.GatedResidualNetwork(3, 4, 2, groups=5).double()
    a = torch.randn(6, 5, 3, dtype=torch.float64)
    got = block(a)
    assert got.shape == (6, 5, 2)
    for g in range(5):
        single = grn.GatedResidualNetwork(3, 4, 2).double()
        with torch.no_grad():
            for name, p in single.named_parameters():
                p.copy_(block.get_parameter(name)[g])
        torch.testing.assert_close(got[:, g], single(a[:, g]), rtol=1e-12, atol=1e-12)


def test_settings_are_checked_naming_the_setting_and_the_value() -> None:
    with pytest.raises(ValueError, match=r"width must be an int >= 2 .*got 1"):
        grn.GrnSettings(width=1)
    with pytest.raises(ValueError, match=r"layers must be an int >= 1, got 0"):
        grn.GrnSettings(layers=0)
    with pytest.raises(ValueError, match=r"layers must be an int >= 1, got True"):
        grn.GrnSettings(layers=True)


def test_the_record_is_one_bar_and_builds_a_network_spectral_norm_can_bound() -> None:
    chosen = grn.GrnSettings(width=8, layers=2)
    (record,) = grn.foxhunt_encoders(chosen)
    assert (record.name, record.window, record.settings) == ("grn", 1, chosen)
    network = BranchingNetwork(3 + 2, LearnerConfig(hidden=(16,), head_hidden=8, n_atoms=5),
                               encoder=record.build(3, 2, record.settings))
    assert network.trunk[0].in_features == 8
    assert all(w.ndim in (2, 3) for w in network.weight_matrices())  # no vector among the bounded weights
    assert not [name for name, _ in network.named_buffers() if name.startswith("encoder.")]  # no state


def test_the_plugin_is_installed_under_its_entry_point() -> None:
    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert points.get("grn") == grn.__name__


def test_a_run_selects_the_encoder_by_name_and_saves_it(tmp_path: Path) -> None:
    """``[learner] encoder = "grn"``: discovered through the installed entry point, trained, checkpointed."""
    out = tmp_path / "run"
    result = invoke(*train_args(out, (*ONE_EPOCH, 'learner.encoder="grn"', "plugins.grn.width=8",
                                      "plugins.grn.layers=1")))
    assert result.exit_code == 0, result.output + result.stderr
    assert "grn" in json.loads((out / "plugins.json").read_text(encoding="utf-8"))
    loaded = load_policy(out / "checkpoints/fold_0")
    try:
        assert loaded.policy.metadata["encoder"] == {"name": "grn", "window": 1}
        encoder = loaded.policy.network.encoder
        assert isinstance(encoder, grn.GrnEncoder) and (encoder.width, len(encoder.blocks)) == (8, 1)
    finally:
        loaded.host.close()


def test_a_bad_setting_stops_the_run_naming_it(tmp_path: Path) -> None:
    result = invoke(*train_args(tmp_path / "run", (*ONE_EPOCH, 'learner.encoder="grn"', "plugins.grn.width=1")))
    assert result.exit_code != 0
    assert "[plugins.grn]: width must be an int >= 2" in result.output + result.stderr
    assert not (tmp_path / "run").exists()  # refused before the run directory
