"""Spectral-norm bound after updates; PopArt's rescale preserves unnormalised outputs exactly."""

from __future__ import annotations

import torch

from foxhunt.actions import Branch
from foxhunt.learner import BranchingNetwork, PopArt


def largest_singular_values(weight: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(weight.detach().double(), ord=2)


def test_every_weight_within_sigma_max_after_updates(make_learner) -> None:
    """σ_max small enough that every matrix is pressed against it, a learning rate 3x the default.

    Power iteration estimates σ from below and, warm-started, lags a fast-moving
    matrix; the tolerance covers that lag (docs/learner.md, "Spectral norm").
    """
    sigma_max = 0.7
    learner = make_learner(sigma_max=sigma_max, lr=1e-3, max_grad_norm=50.0)
    for _ in range(60):
        learner.step(64)
    weights = learner.network.weight_matrices()
    assert len(weights) == 11  # trunk 2, value 2, advantage 2, iqn 3, ensemble 2
    for weight in weights:
        sigma = largest_singular_values(weight)
        assert float(sigma.max()) <= sigma_max * 1.02, weight.shape
    # the target is a convex combination of bounded matrices, so it is bounded too
    for weight in learner.target.weight_matrices():
        assert float(largest_singular_values(weight).max()) <= sigma_max * 1.02


def test_weights_under_the_bound_are_left_alone(make_learner) -> None:
    learner = make_learner(sigma_max=1e6)
    before = [w.detach().clone() for w in learner.network.weight_matrices()]
    learner.spectral.project(5)
    for old, new in zip(before, learner.network.weight_matrices(), strict=True):
        assert torch.equal(old, new)


def unnormalised_outputs(net: BranchingNetwork, popart: PopArt, obs: torch.Tensor, taus: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Real actions only (padded ones have no value to preserve)."""
    h = net.features(obs)
    sigma, mu = popart.sigma, popart.mu
    quantiles = net.quantile_values(h, taus) * sigma[:, None] + mu[:, None]  # [B, T, Branch, A]
    ensemble = net.ensemble_values(h) * sigma[:, None] + mu[:, None]  # [K, B, Branch, A]
    return quantiles[..., net.action_mask], ensemble[..., net.action_mask]


def test_popart_rescale_preserves_unnormalised_outputs(kit) -> None:
    g = torch.Generator().manual_seed(4)
    torch.manual_seed(4)
    net = BranchingNetwork(kit.obs_dim, kit.small_config()).double()
    popart = PopArt(len(Branch), net.n_actions, beta=0.5, sigma_min=1e-4, enabled=True, dtype=torch.float64)
    popart.mu.copy_(torch.randn(len(Branch), generator=g, dtype=torch.float64))
    popart.nu.copy_(popart.mu**2 + torch.rand(len(Branch), generator=g, dtype=torch.float64) * 3 + 0.1)
    obs = torch.randn(9, kit.obs_dim, generator=g, dtype=torch.float64)
    taus = torch.rand(9, 4, generator=g, dtype=torch.float64)
    for _ in range(3):
        before = unnormalised_outputs(net, popart, obs, taus)
        mu_before = popart.mu.clone()
        targets = torch.randn(64, len(Branch), generator=g, dtype=torch.float64) * 20 + 7  # far from the stats
        popart.update(targets, net.scalar_output_layers())
        assert not torch.allclose(popart.mu, mu_before)
        after = unnormalised_outputs(net, popart, obs, taus)
        for a, b in zip(before, after, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # padded action rows are still exactly zero
    assert torch.equal(net.iqn_out.weight * (1 - net.iqn_out.row_mask[:, None]), torch.zeros_like(net.iqn_out.weight))


def test_learner_popart_step_preserves_target_outputs(make_learner, kit) -> None:
    """With τ = 0 the target net only changes through PopArt, which must leave its unnormalised outputs alone."""
    learner = make_learner(tau=0.0, popart_beta=0.3, dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    obs = torch.randn(7, kit.obs_dim, generator=g, dtype=torch.float64)
    taus = torch.rand(7, 3, generator=g, dtype=torch.float64)
    before = unnormalised_outputs(learner.target, learner.popart, obs, taus)
    for _ in range(3):
        learner.step(32)
    assert float((learner.popart.mu.abs()).max()) > 1e-3
    after = unnormalised_outputs(learner.target, learner.popart, obs, taus)
    for a, b in zip(before, after, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_popart_rescale_preserves_the_unnormalised_state_value(kit) -> None:
    """The state-value head's rows are [Branch, E]: rescaled per branch, its σ V + μ is unchanged (float64)."""
    g = torch.Generator().manual_seed(6)
    torch.manual_seed(6)
    net = BranchingNetwork(kit.obs_dim, kit.small_config(), state_values=2, centre=lambda v: v.mean(-1)).double()
    popart = PopArt(len(Branch), net.n_actions, beta=0.5, sigma_min=1e-4, enabled=True, dtype=torch.float64)
    obs = torch.randn(9, kit.obs_dim, generator=g, dtype=torch.float64)
    taus = torch.rand(9, 4, generator=g, dtype=torch.float64)

    def state_value() -> torch.Tensor:
        return net.state_value_heads(net.features(obs)) * popart.sigma[:, None] + popart.mu[:, None]  # [B, Branch, E]

    for _ in range(3):
        before, others = state_value(), unnormalised_outputs(net, popart, obs, taus)
        mu_before = popart.mu.clone()
        targets = torch.randn(64, len(Branch), generator=g, dtype=torch.float64) * 20 - 5
        popart.update(targets, net.scalar_output_layers(), net.branch_value_layers())
        assert not torch.allclose(popart.mu, mu_before)
        torch.testing.assert_close(state_value(), before, rtol=1e-12, atol=1e-12)
        for a, b in zip(others, unnormalised_outputs(net, popart, obs, taus), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert len(net.weight_matrices()) == 13  # the head's two matrices are spectrally normalised like every other
