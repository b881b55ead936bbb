"""Expected-SARSA targets (``[learner] target_policy = "expected_sarsa"``) against a float64 numpy reference, their
greedy limit, and the temperature read live from the ``sarsa.temperature`` ISV slot."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foxhunt.actions import Branch
from foxhunt.contract import SARSA_TEMPERATURE, SARSA_TEMPERATURE_FALLBACK
from foxhunt.learner import LearnerConfig
from foxhunt.learner.target_policy import expected_sarsa_next
from foxhunt_plugins import expected_sarsa

PLUGIN = [(expected_sarsa, expected_sarsa.NAME)]


def reference_targets(q: np.ndarray, log_probs: np.ndarray, quantiles: np.ndarray, temperature: np.ndarray,
                      mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sample by sample, branch by branch: π over the real actions, the π-mixture of the atoms' probabilities and
    the π-average of the quantiles (float64)."""
    b, n_branches, _, n = log_probs.shape
    t = quantiles.shape[1]
    probs, averaged = np.zeros((b, n_branches, n)), np.zeros((b, n_branches, t))
    for i in range(b):
        for k in range(n_branches):
            real = np.flatnonzero(mask[k])
            logits = q[i, k, real] / temperature[k]
            pi = np.exp(logits - logits.max())
            pi /= pi.sum()
            for weight, a in zip(pi, real, strict=True):
                probs[i, k] += weight * np.exp(log_probs[i, k, a])
                averaged[i, k] += weight * quantiles[i, :, k, a]
    return probs, averaged


def sarsa_learner(make_learner, **changes):
    return make_learner(target_policy="expected_sarsa", dtype=torch.float64, extra=PLUGIN, **changes)


# make_learner is a builder (a fresh learner per call), so sharing it across examples shares nothing
@settings(deadline=None, max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(temperature=st.lists(st.floats(0.05, 20.0), min_size=len(Branch), max_size=len(Branch)),
       seed=st.integers(0, 2**31 - 1))
def test_expected_sarsa_targets_match_a_float64_reference(make_learner, temperature: list[float], seed: int) -> None:
    learner = sarsa_learner(make_learner, seed=seed % 1000, fill=20)
    assert learner.reads.sources[SARSA_TEMPERATURE] == "isv"
    learner.reads.sarsa_temperature.copy_(torch.tensor(temperature))
    tau_slot = learner.reads.sarsa_temperature.double().numpy()
    torch.manual_seed(seed)
    batch = learner.sample(16)
    support = learner.update_support()
    taus = torch.rand(16, learner.config.n_target_quantiles, dtype=torch.float64)
    got = learner.targets(batch, support, taus)
    with torch.no_grad():
        q = learner.network(batch.next_obs, support).q
        out = learner.target(batch.next_obs, support, taus=taus)
    mask = learner.network.action_mask.numpy()
    probs, averaged = reference_targets(q.numpy(), out.log_probs.numpy(), out.quantiles.numpy(), tau_slot, mask)
    mu, sigma = learner.popart.mu.numpy(), learner.popart.sigma.numpy()
    atoms = support.numpy() * sigma[:, None] + mu[:, None]  # [Branch, N]
    returns, discounts = batch.returns.numpy(), batch.discounts.numpy()
    np.testing.assert_allclose(got.probs.numpy(), probs, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.probs.sum(-1).numpy(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(got.expected.numpy(), returns + discounts * (probs * atoms[None]).sum(-1), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got.quantiles.numpy(),
                               returns[..., None] + discounts[..., None] * (averaged * sigma[:, None] + mu[:, None]),
                               rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got.atoms.numpy(), returns[..., None] + discounts[..., None] * atoms[None], rtol=1e-12, atol=1e-12)


def test_a_cold_policy_gives_the_greedy_targets(make_learner) -> None:
    greedy = make_learner(dtype=torch.float64, extra=PLUGIN)
    sarsa = sarsa_learner(make_learner)
    sarsa.reads.sarsa_temperature.fill_(1e-9)
    torch.manual_seed(3)
    batch = greedy.sample(32)
    support = greedy.update_support()
    taus = torch.rand(32, greedy.config.n_target_quantiles, dtype=torch.float64)
    cold, argmax = sarsa.targets(batch, support, taus), greedy.targets(batch, support, taus)
    for name in ("atoms", "probs", "expected", "quantiles"):
        torch.testing.assert_close(getattr(cold, name), getattr(argmax, name), rtol=1e-12, atol=1e-12)
    sarsa.reads.sarsa_temperature.fill_(5.0)  # read live: a warmer policy mixes the actions
    assert not torch.allclose(sarsa.targets(batch, support, taus).probs, argmax.probs)


def test_padded_actions_get_no_weight_and_a_hot_policy_averages_evenly() -> None:
    g = torch.Generator().manual_seed(2)
    q = torch.randn(3, 2, 4, generator=g, dtype=torch.float64)
    q[:, 1, 3] = float("-inf")  # branch 1 has 3 real actions
    log_probs = torch.log_softmax(torch.randn(3, 2, 4, 5, generator=g, dtype=torch.float64), -1)
    quantiles = torch.randn(3, 6, 2, 4, generator=g, dtype=torch.float64)
    probs, averaged = expected_sarsa_next(q, log_probs, quantiles, torch.tensor([1e9, 1e9]))
    torch.testing.assert_close(probs[:, 0], log_probs[:, 0].exp().mean(1))
    torch.testing.assert_close(probs[:, 1], log_probs[:, 1, :3].exp().mean(1))
    torch.testing.assert_close(averaged[:, 1], quantiles[:, :, 1, :3].mean(-1))


def test_the_switch_and_the_slot_default(make_learner) -> None:
    assert LearnerConfig().target_policy == "greedy"
    with pytest.raises(ValueError, match="target_policy"):
        LearnerConfig(target_policy="softmax")
    plain = make_learner(target_policy="expected_sarsa")  # without the plugin: the fallback constant
    assert plain.reads.sources[SARSA_TEMPERATURE] == "config"
    torch.testing.assert_close(plain.reads.sarsa_temperature, torch.full((len(Branch),), SARSA_TEMPERATURE_FALLBACK))
    learner = make_learner(target_policy="expected_sarsa", extra=PLUGIN, settings={"expected_sarsa": {"temperature": 0.25}})
    torch.testing.assert_close(learner.reads.sarsa_temperature, torch.full((len(Branch),), 0.25))
    for _ in range(3):
        learner.step(32)
    assert all(torch.isfinite(v) for v in learner.loss_values)
