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


def test_without_a_state_value_head_the_network_is_the_one_it_was() -> None:
    """No head asked for: no extra parameters, nothing extra in the output (what a run without IQL gets)."""
    torch.manual_seed(0)
    plain = BranchingNetwork(OBS_DIM, small_config())
    torch.manual_seed(0)
    headed = BranchingNetwork(OBS_DIM, small_config(), state_values=2, centre=lambda v: v.mean(-1))
    plain_names = [name for name, _ in plain.named_parameters()]
    headed_names = [name for name, _ in headed.named_parameters()]
    assert not any(name.startswith("state_value") for name in plain_names)
    assert headed_names[:len(plain_names)] == plain_names  # the head comes last: the rest is drawn identically
    for (_, a), (_, b) in zip(plain.named_parameters(), headed.named_parameters(), strict=False):
        assert torch.equal(a, b)
    out = plain(torch.randn(3, OBS_DIM), torch.linspace(-1, 1, 11).expand(plain.n_branches, 11))
    assert out.state_values is None and out.support is None
    assert plain.branch_value_layers() == [] and headed.branch_value_layers() == [headed.state_value_out]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(1, 9))
def test_state_value_head_and_atoms_centred_on_it_against_numpy(seed: int, batch: int) -> None:
    """The head is one small MLP per branch on the trunk's output; each sample's atoms are its centre plus the
    offsets; q is the expectation over those atoms (float64 numpy reference); the centre carries no gradient."""
    torch.manual_seed(seed)
    network = BranchingNetwork(OBS_DIM, small_config(), state_values=2, centre=lambda v: 0.25 * v[..., 0] + 0.75 * v[..., 1])
    network = network.double()
    obs = torch.randn(batch, OBS_DIM, dtype=torch.float64) * 2.0
    offsets = torch.rand(network.n_branches, 1, dtype=torch.float64) * 3 * torch.linspace(-1, 1, network.n_atoms, dtype=torch.float64)
    out = network(obs, offsets)
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    h = network.features(obs).detach().numpy()
    values = np.zeros((batch, network.n_branches, 2))
    for branch in range(network.n_branches):
        hidden = relu(h @ network.state_value_hidden.weight[branch].detach().numpy().T
                      + network.state_value_hidden.bias[branch].detach().numpy())
        values[:, branch] = (hidden @ network.state_value_out.weight[branch].detach().numpy().T
                             + network.state_value_out.bias[branch].detach().numpy())
    np.testing.assert_allclose(out.state_values.detach().numpy(), values, rtol=1e-12, atol=1e-12)
    centre = 0.25 * values[..., 0] + 0.75 * values[..., 1]
    atoms = centre[..., None] + offsets.numpy()[None]
    np.testing.assert_allclose(out.support.detach().numpy(), atoms, rtol=1e-12, atol=1e-12)
    logits = network.logits(network.features(obs)).detach().numpy()
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    reference = (weights * atoms[:, :, None, :]).sum(-1) / weights.sum(-1)
    real = network.action_mask.expand(batch, -1, -1).numpy()
    np.testing.assert_allclose(out.q.detach().numpy()[real], reference[real], rtol=1e-12, atol=1e-12)
    # acting keeps the shared support: the centre is the same for every action of a branch, so the greedy
    # actions are the same
    assert torch.equal(network.expected_q(obs, offsets).argmax(-1), out.q.argmax(-1))
    # the atoms are coordinates: q's gradient never reaches the head
    grads = torch.autograd.grad(out.q[torch.isfinite(out.q)].sum(), list(network.state_value_out.parameters()),
                                allow_unused=True)
    assert all(g is None for g in grads)


@pytest.mark.parametrize("fused_acting", [True, False])
def test_on_the_cpu_acting_is_the_torch_expression_whatever_fused_acting_says(fused_acting: bool) -> None:
    """``[learner] fused_acting`` reaches the network; the fused kernel is CUDA-only, so on the CPU both settings
    give exactly the torch expression (tests_gpu/test_fused_q.py checks the kernel itself)."""
    from foxhunt.learner import fused_q

    torch.manual_seed(5)
    network = BranchingNetwork(OBS_DIM, small_config(fused_acting=fused_acting))
    assert network.fused_acting is fused_acting
    obs = torch.randn(9, OBS_DIM)
    support = torch.sort(torch.randn(network.n_branches, network.n_atoms) * 5.0, dim=-1).values
    h = network.features(obs)
    assert not fused_q.applies(h, support)
    value, adv_h = network._streams(h)
    weight, bias = network.centred_advantage_layer()
    expected = fused_q.torch_expected_q(adv_h, weight, bias, value, support).masked_fill(~network.action_mask,
                                                                                       float("-inf"))
    assert torch.equal(network.expected_q(obs, support), expected)
