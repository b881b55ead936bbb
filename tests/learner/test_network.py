"""The network's act-only path gives the Q-values of its full forward pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.learner.network import BranchingNetwork
from tests.learner_builders import OBS_DIM, small_config


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(1, 17), n_atoms=st.integers(2, 21))
def test_expected_q_equals_the_q_of_the_full_forward_pass(seed: int, batch: int, n_atoms: int) -> None:
    torch.manual_seed(seed)
    network = BranchingNetwork(OBS_DIM, small_config(n_atoms=n_atoms)).double()
    obs = torch.randn(batch, OBS_DIM, dtype=torch.float64) * 3.0
    support = torch.sort(torch.randn(network.n_branches, n_atoms, dtype=torch.float64) * 5.0, dim=-1).values
    full = network(obs, support).q
    alone = network.expected_q(obs, support)
    padded = ~network.action_mask.expand_as(full)
    assert torch.equal(alone[padded], full[padded])  # both -inf
    assert bool(torch.isneginf(alone[padded]).all())
    torch.testing.assert_close(alone[~padded], full[~padded], rtol=1e-12, atol=1e-12)
    # a numpy reference from the logits: Σ_k z_k e^{l_k - max l} / Σ_k e^{l_k - max l}
    logits = network.logits(network.features(obs)).detach().numpy()
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    reference = (weights * support.numpy()[None, :, None, :]).sum(-1) / weights.sum(-1)
    np.testing.assert_allclose(alone.detach().numpy()[~padded.numpy()], reference[~padded.numpy()], rtol=1e-12, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(1, 9))
@pytest.mark.parametrize("method", ["logits", "acting_logits"])
def test_logits_are_value_plus_advantage_centred_over_the_real_actions(method: str, seed: int, batch: int) -> None:
    torch.manual_seed(seed)
    network = BranchingNetwork(OBS_DIM, small_config()).double()
    with torch.no_grad():  # random, non-zero padded rows too: centring must ignore them
        network.advantage_out.weight.normal_()
        network.advantage_out.bias.normal_()
    h = network.features(torch.randn(batch, OBS_DIM, dtype=torch.float64))
    logits = getattr(network, method)(h).detach().numpy()
    # numpy float64 reference: the dueling formula on the layers' own outputs, real actions only
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    hn = h.detach().numpy()
    value = relu(hn @ network.value_hidden.weight.detach().numpy().T + network.value_hidden.bias.detach().numpy())
    value = value @ network.value_out.weight.detach().numpy().T + network.value_out.bias.detach().numpy()
    value = value.reshape(batch, network.n_branches, network.n_atoms)
    for branch in range(network.n_branches):
        w_hidden = network.advantage_hidden.weight[branch].detach().numpy()
        adv_h = relu(hn @ w_hidden.T + network.advantage_hidden.bias[branch].detach().numpy())
        out = adv_h @ network.advantage_out.weight[branch].detach().numpy().T + network.advantage_out.bias[branch].detach().numpy()
        out = out.reshape(batch, network.n_actions, network.n_atoms)
        real = network.action_mask[branch].numpy()
        centred = out[:, real] - out[:, real].mean(axis=1, keepdims=True)
        expected = value[:, branch, None, :] + centred
        np.testing.assert_allclose(logits[:, branch, real], expected, rtol=1e-10, atol=1e-10)
