"""The network's act-only path gives the Q-values of its full forward pass."""

from __future__ import annotations

import numpy as np
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
