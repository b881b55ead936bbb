"""Robust PopArt (``[learner] popart_stats = "robust"``): its running quartiles against a float64 numpy reference,
its resistance to outliers next to the moments, and the same output-preserving rescale."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.actions import Branch
from foxhunt.learner import BranchingNetwork, LearnerConfig, PopArt, RobustPopArt, popart_of
from foxhunt.learner.popart import IQR_NORMAL, batch_quartiles

N_BRANCHES = len(Branch)


def reference_robust(batches: list[np.ndarray], beta: float, sigma_min: float) -> tuple[np.ndarray, np.ndarray]:
    """The update rule written plainly: each running quartile q ← (1 − β) q + β numpy.quantile(batch, q)."""
    lower = np.full(N_BRANCHES, -0.6744897501960817)
    median = np.zeros(N_BRANCHES)
    upper = np.full(N_BRANCHES, 0.6744897501960817)
    for batch in batches:
        q1, q2, q3 = (np.quantile(batch, q, axis=0) for q in (0.25, 0.5, 0.75))
        lower = (1 - beta) * lower + beta * q1
        median = (1 - beta) * median + beta * q2
        upper = (1 - beta) * upper + beta * q3
    return median, np.maximum((upper - lower) / 1.3489795003921634, sigma_min)


@settings(deadline=None)
@given(batch=st.integers(1, 40), updates=st.integers(1, 4), beta=st.floats(1e-3, 1.0), seed=st.integers(0, 2**31 - 1))
def test_robust_statistics_match_a_float64_reference(batch: int, updates: int, beta: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    batches = [rng.standard_t(2, size=(batch, N_BRANCHES)) * rng.uniform(0.1, 10) + rng.normal(0, 5)
               for _ in range(updates)]
    popart = RobustPopArt(N_BRANCHES, 4, beta, 1e-4, True, dtype=torch.float64)
    for values in batches:
        popart.update(torch.from_numpy(values), [])
    median, sigma = reference_robust(batches, beta, 1e-4)
    np.testing.assert_allclose(popart.mu.numpy(), median, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(popart.sigma.numpy(), sigma, rtol=1e-12, atol=1e-12)
    assert bool((popart.lower <= popart.mu).all()) and bool((popart.mu <= popart.upper).all())


def test_batch_quartiles_are_numpys_linear_quantiles() -> None:
    rng = np.random.default_rng(3)
    for size in (1, 2, 3, 4, 7, 128):
        values = rng.normal(size=(size, N_BRANCHES))
        got = batch_quartiles(torch.from_numpy(values))
        for q, tensor in zip((0.25, 0.5, 0.75), got, strict=True):
            np.testing.assert_allclose(tensor.numpy(), np.quantile(values, q, axis=0), rtol=0, atol=1e-15)


def test_both_start_at_mean_zero_and_sigma_one() -> None:
    for kind in (PopArt, RobustPopArt):
        popart = kind(N_BRANCHES, 4, 0.1, 1e-4, True, dtype=torch.float64)
        torch.testing.assert_close(popart.mu, torch.zeros(N_BRANCHES, dtype=torch.float64))
        torch.testing.assert_close(popart.sigma, torch.ones(N_BRANCHES, dtype=torch.float64), rtol=1e-15, atol=1e-15)
    assert IQR_NORMAL == pytest.approx(2 * 0.6744897501960817, abs=1e-15)


def test_outliers_move_the_robust_statistics_much_less_than_the_moments() -> None:
    """The same well-behaved stream, then one batch where 3 targets of 64 are 1000σ away."""
    g = torch.Generator().manual_seed(11)
    moments = PopArt(N_BRANCHES, 4, 0.05, 1e-4, True, dtype=torch.float64)
    robust = RobustPopArt(N_BRANCHES, 4, 0.05, 1e-4, True, dtype=torch.float64)
    for _ in range(200):
        batch = torch.randn(64, N_BRANCHES, generator=g, dtype=torch.float64)
        moments.update(batch, [])
        robust.update(batch, [])
    before = {name: (p.mu.clone(), p.sigma.clone()) for name, p in (("moments", moments), ("robust", robust))}
    spiked = torch.randn(64, N_BRANCHES, generator=g, dtype=torch.float64)
    spiked[:3] = 1000.0
    moments.update(spiked, [])
    robust.update(spiked, [])
    shift = {name: (float((p.mu - before[name][0]).abs().max()), float((p.sigma - before[name][1]).abs().max()))
             for name, p in (("moments", moments), ("robust", robust))}
    assert shift["moments"][0] > 2.0 and shift["moments"][1] > 20.0  # 0.05·3/64·1000 on μ; σ² grows by ~2300
    assert shift["robust"][0] < 0.02 and shift["robust"][1] < 0.02
    assert shift["robust"][1] * 1000 < shift["moments"][1]


def test_robust_rescale_preserves_unnormalised_outputs(kit) -> None:
    """The output-preserving correction is PopArt's own; it holds for the robust statistics too (float64)."""
    g = torch.Generator().manual_seed(8)
    torch.manual_seed(8)
    net = BranchingNetwork(kit.obs_dim, kit.small_config(), state_values=2, centre=lambda v: v.mean(-1)).double()
    popart = RobustPopArt(N_BRANCHES, net.n_actions, beta=0.5, sigma_min=1e-4, enabled=True, dtype=torch.float64)
    obs = torch.randn(9, kit.obs_dim, generator=g, dtype=torch.float64)
    taus = torch.rand(9, 4, generator=g, dtype=torch.float64)

    def outputs() -> tuple[torch.Tensor, ...]:
        h = net.features(obs)
        sigma, mu = popart.sigma, popart.mu
        quantiles = net.quantile_values(h, taus) * sigma[:, None] + mu[:, None]
        ensemble = net.ensemble_values(h) * sigma[:, None] + mu[:, None]
        state = net.state_value_heads(h) * sigma[:, None] + mu[:, None]
        return quantiles[..., net.action_mask], ensemble[..., net.action_mask], state

    for _ in range(3):
        before, mu_before, sigma_before = outputs(), popart.mu.clone(), popart.sigma.clone()
        targets = torch.randn(64, N_BRANCHES, generator=g, dtype=torch.float64) * 20 + 7
        popart.update(targets, net.scalar_output_layers(), net.branch_value_layers())
        assert not torch.allclose(popart.mu, mu_before) and not torch.allclose(popart.sigma, sigma_before)
        for a, b in zip(before, outputs(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_robust_quartiles_sync_through_the_moments_hook() -> None:
    """Several devices: the ranks' batch quartiles go through ``moments_sync`` (Q1/median and median/Q3)."""
    g = torch.Generator().manual_seed(5)
    targets = torch.randn(16, N_BRANCHES, generator=g, dtype=torch.float64)
    popart = RobustPopArt(N_BRANCHES, 4, 0.5, 1e-3, True, dtype=torch.float64)
    seen = []
    low = torch.stack([torch.full((N_BRANCHES,), -2.0), torch.full((N_BRANCHES,), 1.0)]).double()
    high = torch.stack([torch.full((N_BRANCHES,), 1.0), torch.full((N_BRANCHES,), 4.0)]).double()
    popart.moments_sync = lambda a, b: (seen.append((a.clone(), b.clone())), (low, high))[1]
    popart.update(targets, [])
    q1, median, q3 = batch_quartiles(targets)
    torch.testing.assert_close(seen[0][0], torch.stack([q1, median]))
    torch.testing.assert_close(seen[0][1], torch.stack([median, q3]))
    torch.testing.assert_close(popart.mu, torch.full((N_BRANCHES,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(popart.lower, torch.full((N_BRANCHES,), 0.5 * -IQR_NORMAL / 2 - 1.0, dtype=torch.float64))
    torch.testing.assert_close(popart.upper, torch.full((N_BRANCHES,), 0.5 * IQR_NORMAL / 2 + 2.0, dtype=torch.float64))


def test_the_config_picks_the_statistics(make_learner) -> None:
    assert LearnerConfig().popart_stats == "moments"
    assert type(popart_of("moments", N_BRANCHES, 4, 0.1, 1e-4, True)) is PopArt
    with pytest.raises(ValueError, match="popart_stats"):
        LearnerConfig(popart_stats="median")
    with pytest.raises(ValueError, match="popart_stats"):
        popart_of("median", N_BRANCHES, 4, 0.1, 1e-4, True)
    default = make_learner()
    assert type(default.popart) is PopArt and set(default.popart.state_dict()) == {"mu", "nu"}
    robust = make_learner(popart_stats="robust", popart_beta=0.3)
    assert type(robust.popart) is RobustPopArt and set(robust.popart.state_dict()) == {"mu", "lower", "upper"}
    for _ in range(3):
        robust.step(32)
    assert float(robust.popart.mu.abs().max()) > 1e-3
    assert bool(torch.isfinite(robust.popart.sigma).all())
    assert attrs.evolve(LearnerConfig(), popart_stats="robust").popart_stats == "robust"
