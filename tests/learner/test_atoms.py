"""Atom spacing (foxhunt.learner.atoms): the quantile and learned spacings against float64 references, and in a
learner."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from learner_builders import assert_update_middle_compiles, update_arguments
from tiny_run import train_tiny

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.errors import LayoutError
from foxhunt.learner import LearnerConfig
from foxhunt.contract import KNOT_LEVELS, AtomKnot
from foxhunt.learner.atoms import AtomShape, batch_quantiles, knot_gradient, knot_interpolation, quantile_unit
from foxhunt.learner.distributional import projection_error_gradient
from foxhunt_plugins.adaptive import support

N_BRANCHES, K = len(Branch), AtomKnot.size()
EVEN = 2.0 * np.array(KNOT_LEVELS) - 1.0  # where an even spacing puts each level


def reference_unit(knots: np.ndarray, n_atoms: int, mix: float) -> np.ndarray:
    """Float64, written from the definition: atom i at level i/(N-1) through the piecewise-linear map of
    [0, levels, 1] to [-1, knots, 1], blended with an even spacing."""
    levels = np.array([0.0, *KNOT_LEVELS, 1.0])
    u = np.arange(n_atoms) / (n_atoms - 1)
    rows = [np.interp(u, levels, np.r_[-1.0, np.clip(row, -1.0, 1.0), 1.0]) for row in knots]
    return mix * np.linspace(-1.0, 1.0, n_atoms)[None, :] + (1.0 - mix) * np.array(rows)


@given(batch=st.integers(1, 300), seed=st.integers(0, 2**31 - 1))
def test_batch_quantiles_match_numpy_linear_quantiles(batch: int, seed: int) -> None:
    values = np.random.default_rng(seed).standard_t(3, size=(batch, N_BRANCHES))
    got = batch_quantiles(torch.tensor(values, dtype=torch.float64)).numpy()
    want = np.quantile(values, KNOT_LEVELS, axis=0, method="linear").T  # [Branch, K]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@given(n_atoms=st.integers(2, 101), seed=st.integers(0, 2**31 - 1), mix=st.floats(0.01, 1.0))
def test_the_quantile_unit_matches_a_float64_interpolation(n_atoms: int, seed: int, mix: float) -> None:
    rng = np.random.default_rng(seed)
    knots = np.sort(rng.uniform(-1.2, 1.2, (N_BRANCHES, K)), axis=1)  # some outside [-1, 1]: clamped
    offsets = torch.tensor(knots - EVEN, dtype=torch.float64).reshape(-1)
    got = quantile_unit(offsets, knot_interpolation(n_atoms, dtype=torch.float64),
                        torch.tensor(EVEN),
                        torch.linspace(-1.0, 1.0, n_atoms, dtype=torch.float64), mix).numpy()
    want = reference_unit(knots, n_atoms, mix)
    np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-12)
    # what the projection needs: from -1 to +1, every gap at least the even spacing's share of it
    np.testing.assert_allclose(got[:, 0], -1.0, atol=1e-12)
    np.testing.assert_allclose(got[:, -1], 1.0, atol=1e-12)
    assert (np.diff(got, axis=1) >= mix * 2.0 / (n_atoms - 1) - 1e-12).all()


def test_zero_offsets_are_the_even_spacing() -> None:
    shape = AtomShape(51, "quantile", 0.25, torch.zeros(N_BRANCHES * K), dtype=torch.float64, device="cpu")
    np.testing.assert_allclose(shape().numpy(), np.tile(np.linspace(-1.0, 1.0, 51), (N_BRANCHES, 1)), atol=1e-15)


@pytest.mark.parametrize("spacing", ["quantile", "learned"])
def test_a_spacing_placed_by_the_knots_without_the_knots_slot_is_refused(spacing: str) -> None:
    with pytest.raises(LayoutError, match=f'atom_spacing = "{spacing}".*support.knots'):
        AtomShape(51, spacing, 0.25, None, dtype=torch.float32, device="cpu")


def test_an_unknown_spacing_and_a_zero_mix_are_refused() -> None:
    assert LearnerConfig(atom_spacing="learned").atom_spacing == "learned"
    with pytest.raises(ValueError, match="atom_spacing"):
        LearnerConfig(atom_spacing="cubic")
    with pytest.raises(ValueError, match="atom_spacing_mix"):
        LearnerConfig(atom_spacing_mix=0.0)


def quantile_learner(make_learner, spacing: str = "quantile"):
    return make_learner(extra=[(support, "support")], atom_spacing=spacing, dtype=torch.float64)


def test_the_learner_places_its_atoms_by_the_knots_slot(make_learner) -> None:
    learner = quantile_learner(make_learner)
    rng = np.random.default_rng(3)
    knots = np.sort(rng.uniform(-0.9, 0.9, (N_BRANCHES, K)), axis=1)
    center, half = rng.normal(0.0, 2.0, N_BRANCHES), rng.uniform(0.5, 5.0, N_BRANCHES)
    learner.isv.write(contract.SUPPORT_KNOTS, torch.tensor((knots - EVEN).ravel()))
    learner.isv.write(contract.SUPPORT_CENTER, torch.tensor(center))
    learner.isv.write(contract.SUPPORT_HALF_WIDTH, torch.tensor(half))
    n_atoms = learner.config.n_atoms
    want = center[:, None] + half[:, None] * reference_unit(knots, n_atoms, learner.config.atom_spacing_mix)
    # the ISV is float32: the knots and the support slots were rounded on the way in
    np.testing.assert_allclose(learner.support().numpy(), want, rtol=1e-6, atol=1e-5)


def test_an_update_writes_the_targets_quantiles_for_the_support_kernel(make_learner) -> None:
    learner = quantile_learner(make_learner)
    learner.update(learner.sample())
    quantiles = learner.signals[contract.RETURN_QUANTILES]
    assert quantiles.shape == (N_BRANCHES, K)
    assert torch.isfinite(quantiles).all() and (quantiles.diff(dim=1) >= 0).all()
    assert (quantiles[:, -1] > quantiles[:, 0]).all()  # random rewards: the targets differ across the batch
    assert torch.isfinite(learner.loss_values).all()


def test_the_update_middle_compiles_with_the_quantile_spacing(make_learner) -> None:
    assert_update_middle_compiles(quantile_learner(make_learner))  # the batch quantiles at static positions


def test_an_even_spacing_computes_no_quantiles(make_learner) -> None:
    """The default run's update sorts nothing for the quantile spacing: the signal stays as allocated."""
    learner = make_learner(extra=[(support, "support")], dtype=torch.float64)
    step = learner.functional(learner.param_dict, *update_arguments(learner))
    assert step.atom_signal is None
    learner.update(learner.sample())
    assert not learner.signals[contract.RETURN_QUANTILES].any()
    assert not learner.signals[contract.KNOT_GRADIENT].any()


@pytest.mark.parametrize("spacing", ["quantile", "learned"])
def test_a_tiny_run_with_knot_spacing_moves_the_knots_and_backtests(tmp_path, monkeypatch, spacing: str) -> None:
    """Through `foxhunt train`: the support kernel moves the knots away from the even spacing, and the fold's
    saved policy (whose ISV carries them) is loaded and backtested."""
    from foxhunt.checkpoint_backtest import load_policy

    out = train_tiny(tmp_path, monkeypatch, "--set", f'learner.atom_spacing="{spacing}"')
    fold = json.loads((out / "summary.json").read_text())["folds"][0]
    assert "agent" in fold["test"]
    loaded = load_policy(out / "checkpoints" / "fold_0")  # as `foxhunt backtest` loads it
    try:
        policy = loaded.policy
        offsets = policy.isv.view(contract.SUPPORT_KNOTS)
        assert torch.isfinite(offsets).all() and offsets.abs().max() > 0.0  # the kernel moved the knots
        atoms = policy.support()
        assert (atoms.diff(dim=1) > 0).all()  # strictly increasing: what the projection needs
        gaps = atoms.diff(dim=1) / atoms.diff(dim=1).mean(dim=1, keepdim=True)
        assert (gaps.max(dim=1).values - gaps.min(dim=1).values > 1e-3).all()  # not the even spacing any more
    finally:
        loaded.host.close()


# -- the learned spacing ----------------------------------------------------------------------------------------


def reference_projection(atoms: np.ndarray, probs: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Float64 hat projection, one target atom at a time: each target's mass (clamped into the support) is split
    between its two neighbouring atoms in proportion to its distance from the other one."""
    out = np.zeros(len(z))
    for t, p in zip(np.clip(atoms, z[0], z[-1]), probs, strict=True):
        i = min(int(np.searchsorted(z, t, side="right")) - 1, len(z) - 2)
        w = (t - z[i]) / (z[i + 1] - z[i])
        out[i] += p * (1.0 - w)
        out[i + 1] += p * w
    return out


def reference_cramer(atoms: np.ndarray, probs: np.ndarray, z: np.ndarray) -> float:
    """Float64 squared Cramér distance ∫ (F − F_Π)² dx between the clamped target and its projection onto ``z``:
    both CDFs are steps, so the integral is exact over the merged break points."""
    clamped = np.clip(atoms, z[0], z[-1])
    points = np.concatenate([clamped, z])
    mass = np.concatenate([probs, -reference_projection(atoms, probs, z)])
    order = np.argsort(points, kind="stable")
    difference = np.cumsum(mass[order])  # F − F_Π just right of each break point
    return float(np.sum(np.diff(points[order]) * difference[:-1] ** 2))


def random_targets(rng: np.random.Generator, n_atoms: int, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Sorted target atoms (some outside [-1, 1]: clamped) and random probabilities summing to 1."""
    return np.sort(rng.normal(rng.normal(0.0, 0.3), width, n_atoms)), rng.dirichlet(np.ones(n_atoms))


def distance_to_interior_atoms(atoms: np.ndarray, z: np.ndarray) -> float:
    """How close any (clamped) target atom comes to an interior atom. The error's gradient has a kink wherever a
    target sits on an atom, so a central difference is only compared where no target is within its step."""
    clamped = np.clip(atoms, z[0], z[-1])
    return float(np.abs(clamped[:, None] - z[None, 1:-1]).min())


def random_support(rng: np.random.Generator, n_atoms: int) -> np.ndarray:
    """From -1 to +1, strictly increasing, gaps at least a tenth of the even gap (central differences stay inside)."""
    gaps = 0.1 + rng.uniform(0.0, 1.0, n_atoms - 1)
    return -1.0 + 2.0 * np.concatenate([[0.0], np.cumsum(gaps)]) / gaps.sum()


@given(n_atoms=st.integers(3, 41), seed=st.integers(0, 2**31 - 1), width=st.floats(0.05, 1.5))
def test_the_projection_error_gradient_matches_float64_finite_differences(n_atoms: int, seed: int,
                                                                          width: float) -> None:
    rng = np.random.default_rng(seed)
    atoms, probs = random_targets(rng, n_atoms, width)
    z = random_support(rng, n_atoms)
    got = projection_error_gradient(torch.tensor(atoms)[None], torch.tensor(probs)[None], torch.tensor(z)[None])[0]
    step = 1e-7 * np.diff(z).min()
    assume(distance_to_interior_atoms(atoms, z) > 10.0 * step)
    want = np.zeros(n_atoms)  # the end atoms are the clamp bounds: the spacing never moves them
    for i in range(1, n_atoms - 1):
        up, down = z.copy(), z.copy()
        up[i] += step
        down[i] -= step
        want[i] = (reference_cramer(atoms, probs, up) - reference_cramer(atoms, probs, down)) / (2.0 * step)
    # a target atom within `step` of an atom makes the one-sided slopes differ: the test draws continuous values
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-9)


def test_the_projection_error_gradient_takes_a_per_sample_support_row_by_row() -> None:
    rng = np.random.default_rng(5)
    atoms = torch.tensor(np.stack([random_targets(rng, 11, 0.5)[0] for _ in range(6)])).view(3, 2, 11)
    probs = torch.tensor(np.stack([random_targets(rng, 11, 0.5)[1] for _ in range(6)])).view(3, 2, 11)
    supports = torch.tensor(np.stack([random_support(rng, 11) for _ in range(6)])).view(3, 2, 11)
    together = projection_error_gradient(atoms, probs, supports)
    for b in range(3):
        for branch in range(2):
            alone = projection_error_gradient(atoms[b, branch][None], probs[b, branch][None], supports[b, branch][None])
            torch.testing.assert_close(together[b, branch], alone[0], rtol=0.0, atol=0.0)


def reference_batch_error(knots: np.ndarray, center: np.ndarray, half: np.ndarray, atoms: np.ndarray,
                          probs: np.ndarray, mix: float) -> float:
    """What the knot gradient is the gradient of: per branch, the batch mean of the squared Cramér distance in
    half-widths, times N − 1, summed over branches (each branch's knots reach only its own term)."""
    n_atoms = atoms.shape[-1]
    unit = reference_unit(knots, n_atoms, mix)  # [Branch, N]
    total = 0.0
    for branch in range(knots.shape[0]):
        z = center[branch] + half[branch] * unit[branch]
        errors = [reference_cramer(atoms[b, branch], probs[b, branch], z) for b in range(atoms.shape[0])]
        total += (n_atoms - 1) * np.mean(errors) / half[branch]
    return total


@given(seed=st.integers(0, 2**31 - 1), mix=st.floats(0.05, 0.9), n_atoms=st.sampled_from([11, 21, 51]))
def test_the_knot_gradient_matches_float64_finite_differences_through_the_atom_map(seed: int, mix: float,
                                                                                   n_atoms: int) -> None:
    rng = np.random.default_rng(seed)
    batch = 3
    knots = EVEN[None, :] + np.sort(rng.uniform(-0.08, 0.08, (N_BRANCHES, K)), axis=1)  # inside (-1, 1), sorted
    center, half = rng.normal(0.0, 1.0, N_BRANCHES), rng.uniform(0.5, 3.0, N_BRANCHES)
    draws = [random_targets(rng, n_atoms, 0.6) for _ in range(batch * N_BRANCHES)]
    atoms = np.stack([center[i % N_BRANCHES] + half[i % N_BRANCHES] * a for i, (a, _) in enumerate(draws)])
    atoms = atoms.reshape(batch, N_BRANCHES, n_atoms)
    probs = np.stack([p for _, p in draws]).reshape(batch, N_BRANCHES, n_atoms)
    unit = torch.tensor(reference_unit(knots, n_atoms, mix))
    support = torch.tensor(center)[:, None] + torch.tensor(half)[:, None] * unit  # [Branch, N]
    step = 1e-7  # moves an atom by at most half_width × step
    assume(min(distance_to_interior_atoms(atoms[b, branch], support[branch].numpy())
               for b in range(batch) for branch in range(N_BRANCHES)) > 10.0 * half.max() * step)
    got = knot_gradient(torch.tensor(atoms), torch.tensor(probs), support,
                        knot_interpolation(n_atoms, dtype=torch.float64), mix).numpy()
    want = np.zeros((N_BRANCHES, K))
    for branch in range(N_BRANCHES):
        for k in range(K):
            up, down = knots.copy(), knots.copy()
            up[branch, k] += step
            down[branch, k] -= step
            want[branch, k] = (reference_batch_error(up, center, half, atoms, probs, mix)
                               - reference_batch_error(down, center, half, atoms, probs, mix)) / (2.0 * step)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-8)


def test_descending_the_knot_gradient_lowers_the_projection_error() -> None:
    """The learned spacing's loop, with the support kernel's step written out: from an even spacing, on targets
    bunched to one side, the knots follow the mass and the batch's projection error falls."""
    rng = np.random.default_rng(11)
    n_atoms, mix, batch = 21, 0.25, 64
    interpolation = knot_interpolation(n_atoms, dtype=torch.float64)
    even, uniform = torch.tensor(EVEN), torch.linspace(-1.0, 1.0, n_atoms, dtype=torch.float64)
    settings = support.SupportSettings()
    offsets = torch.zeros(N_BRANCHES * K, dtype=torch.float64)
    atoms = torch.tensor(np.sort(rng.normal(0.4, 0.15, (batch, N_BRANCHES, n_atoms)), axis=-1))
    probs = torch.tensor(rng.dirichlet(np.ones(n_atoms), (batch, N_BRANCHES)))

    def error(unit: torch.Tensor) -> float:
        return float(np.mean([reference_cramer(atoms[b, r].numpy(), probs[b, r].numpy(), unit[r].numpy())
                              for b in range(batch) for r in range(N_BRANCHES)]))

    start = error(quantile_unit(offsets, interpolation, even, uniform, mix))
    for _ in range(300):
        unit = quantile_unit(offsets, interpolation, even, uniform, mix)
        gradient = knot_gradient(atoms, probs, unit, interpolation, mix).reshape(-1)
        step = (settings.knot_learning_rate * gradient).clamp(-settings.knot_max_step, settings.knot_max_step)
        offsets = offsets - step
    end = error(quantile_unit(offsets, interpolation, even, uniform, mix))
    assert end < 0.8 * start
    places = (offsets.view(N_BRANCHES, K) + even).numpy()
    assert (places[:, 2] > 0.1).all()  # the median knot moved toward the targets, centred at +0.4


def test_an_update_with_the_learned_spacing_writes_the_knot_gradient(make_learner) -> None:
    learner = quantile_learner(make_learner, "learned")
    batch, support_used, taus, targets = update_arguments(learner)
    step = learner.functional(learner.param_dict, batch, support_used, taus, targets)
    want = knot_gradient(targets.atoms, targets.probs, learner.support(), learner.atom_shape.interpolation,
                         learner.config.atom_spacing_mix)
    torch.testing.assert_close(step.atom_signal, want)
    learner.update(learner.sample())
    gradient = learner.signals[contract.KNOT_GRADIENT]
    assert gradient.shape == (N_BRANCHES, K) and torch.isfinite(gradient).all() and gradient.abs().max() > 0.0
    assert not learner.signals[contract.RETURN_QUANTILES].any()  # the quantiles are the other spacing's signal


def test_the_update_middle_compiles_with_the_learned_spacing(make_learner) -> None:
    assert_update_middle_compiles(quantile_learner(make_learner, "learned"))


def test_the_learned_spacing_takes_each_samples_atoms_when_they_are_centred(make_learner) -> None:
    """With the IQL value head centring the atoms per sample, the knot gradient is taken on the atoms each sample's
    C51 loss projects onto; the compiled middle and the eager loop agree on it."""
    from foxhunt_plugins.losses import iql

    learner = make_learner(extra=[(support, "support"), (iql, "iql")], settings={"iql": {"enabled": True}},
                           budgets={"c51": 0.3, "iql": 0.1}, atom_spacing="learned", dtype=torch.float64)
    batch, offsets, taus, targets = update_arguments(learner)
    online = learner.network(batch.obs, offsets, taus=taus)
    assert online.support is not None and online.support.shape[0] == batch.obs.shape[0]
    want = knot_gradient(targets.atoms, targets.probs, online.support, learner.atom_shape.interpolation,
                         learner.config.atom_spacing_mix)
    functional = learner.functional(learner.param_dict, batch, offsets, taus, targets).atom_signal
    torch.testing.assert_close(functional, want)
    torch.testing.assert_close(learner.loop_gradients(batch, offsets, taus, targets).atom_signal, want)
