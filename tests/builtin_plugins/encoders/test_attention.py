"""The causal attention encoder against a float64 reference written position by position, its settings and
its record."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.learner import BranchingNetwork, LearnerConfig
from foxhunt_plugins.encoders import attention


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    mean = x.mean()
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean() + 1e-5)


def linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return layer.weight.double() @ x + layer.bias.double()


def reference(encoder: attention.CausalAttentionEncoder, x: torch.Tensor) -> torch.Tensor:
    """One sample ``x [W × F + P]`` in float64, one position and one head at a time."""
    w, f = encoder.window, encoder.n_features
    rows = [x[i * f:(i + 1) * f] for i in range(w)]
    h = [linear(encoder.embed, row) + encoder.position[i].double() for i, row in enumerate(rows)]
    for block in encoder.blocks:
        width = h[0].shape[0]
        size = width // block.heads
        normed = [layer_norm(v) for v in h]
        q = [linear(block.query, v) for v in normed]
        k = [linear(block.key, v) for v in normed]
        v_ = [linear(block.value, v) for v in normed]
        out = []
        for i in range(w):
            mixed = torch.zeros(width, dtype=torch.float64)
            for head in range(block.heads):
                part = slice(head * size, (head + 1) * size)
                scores = torch.stack([q[i][part] @ k[j][part] / math.sqrt(size) for j in range(i + 1)])
                weights = torch.softmax(scores, 0)
                mixed[part] = sum(weights[j] * v_[j][part] for j in range(i + 1))
            after = h[i] + linear(block.out, mixed)
            out.append(after + linear(block.ff_out, torch.relu(linear(block.ff_in, layer_norm(after)))))
        h = out
    return torch.cat([layer_norm(h[-1]), x[w * f:]])


@settings(deadline=None, max_examples=10)
@given(window=st.integers(2, 5), layers=st.integers(1, 2), heads=st.sampled_from([1, 2]), seed=st.integers(0, 999))
def test_the_encoder_matches_a_float64_reference(window: int, layers: int, heads: int, seed: int) -> None:
    torch.manual_seed(seed)
    encoder = attention.build(3, 2, attention.AttentionSettings(window=window, width=4, heads=heads, layers=layers))
    x = torch.randn(5, window * 3 + 2)
    got = encoder(x)
    assert got.shape == (5, encoder.out_features) == (5, 4 + 2)
    expected = torch.stack([reference(encoder, row.double()) for row in x])
    torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="divide"):
        attention.AttentionSettings(width=6, heads=4)
    with pytest.raises(ValueError, match="layers"):
        attention.AttentionSettings(layers=3)
    with pytest.raises(ValueError, match="window"):
        attention.AttentionSettings(window=1)


def test_the_record_carries_the_window_and_builds_a_network_spectral_norm_can_bound() -> None:
    chosen = attention.AttentionSettings(window=6, width=8, heads=2)
    (record,) = attention.foxhunt_encoders(chosen)
    assert (record.name, record.window, record.settings) == ("attention", 6, chosen)
    module = record.build(3, 2, record.settings)
    network = BranchingNetwork(6 * 3 + 2, LearnerConfig(hidden=(16,), head_hidden=8, n_atoms=5), encoder=module)
    assert network.trunk[0].in_features == 8 + 2
    assert all(w.ndim in (2, 3) for w in network.weight_matrices())  # no vector among the bounded weights
    assert "encoder.causal" not in network.state_dict()  # a constant, not state
