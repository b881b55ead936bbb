"""Quantile-Huber loss against a float64 derivation written out term by term; batched equals per-sample."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.learner import quantile_huber


def derived(pred: np.ndarray, target: np.ndarray, taus: np.ndarray, kappa: float) -> float:
    """IQN eq. 10 in float64: sum over i of the mean over j of |τ_i - 1{δ_ij < 0}| · L_κ(δ_ij) / κ."""
    total = 0.0
    for theta, tau in zip(pred, taus, strict=True):
        acc = 0.0
        for y in target:
            delta = y - theta
            huber = 0.5 * delta**2 if abs(delta) <= kappa else kappa * (abs(delta) - 0.5 * kappa)
            acc += abs(tau - (1.0 if delta < 0 else 0.0)) * huber / kappa
        total += acc / len(target)
    return total


@pytest.mark.parametrize("kappa", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("seed", range(3))
def test_matches_derivation_and_batched_equals_per_sample(seed: int, kappa: float) -> None:
    rng = np.random.default_rng(seed)
    batch, n_pred, n_target = 6, int(rng.integers(1, 9)), int(rng.integers(1, 9))
    pred = rng.normal(0, 2, (batch, n_pred))
    target = rng.normal(0, 2, (batch, n_target))
    taus = rng.uniform(0, 1, (batch, n_pred))
    batched = quantile_huber(torch.tensor(pred, dtype=torch.float32), torch.tensor(target, dtype=torch.float32),
                             torch.tensor(taus, dtype=torch.float32), kappa)
    exact = np.array([derived(pred[b], target[b], taus[b], kappa) for b in range(batch)])
    np.testing.assert_allclose(batched.numpy(), exact, rtol=1e-5, atol=1e-6)
    pred64, target64, taus64 = (torch.tensor(x) for x in (pred, target, taus))
    batched64 = quantile_huber(pred64, target64, taus64, kappa)
    single = torch.stack([quantile_huber(pred64[b], target64[b], taus64[b], kappa) for b in range(batch)])
    assert torch.equal(batched64, single)
    np.testing.assert_allclose(batched64.numpy(), exact, rtol=1e-12)


def test_gradient_matches_derivation() -> None:
    """d/dθ_i = -(1/|j|) Σ_j |τ_i - 1{δ<0}| · clip(δ, -κ, κ) / κ."""
    rng = np.random.default_rng(11)
    pred = torch.tensor(rng.normal(0, 2, 5), requires_grad=True)
    target = torch.tensor(rng.normal(0, 2, 7))
    taus = torch.tensor(rng.uniform(0, 1, 5))
    kappa = 1.0
    quantile_huber(pred, target, taus, kappa).backward()
    delta = target[None, :] - pred.detach()[:, None]
    weight = (taus[:, None] - (delta < 0).double()).abs()
    expected = -(weight * delta.clamp(-kappa, kappa) / kappa).mean(-1)
    np.testing.assert_allclose(pred.grad.numpy(), expected.numpy(), rtol=1e-12)
