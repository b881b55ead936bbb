"""Atom spacing (foxhunt.learner.atoms): the quantile spacing against float64 references, and in a learner."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from learner_builders import assert_update_middle_compiles, update_arguments
from tiny_run import train_tiny

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.errors import LayoutError
from foxhunt.learner import LearnerConfig
from foxhunt.contract import KNOT_LEVELS, AtomKnot
from foxhunt.learner.atoms import AtomShape, batch_quantiles, knot_interpolation, quantile_unit
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


def test_the_quantile_spacing_without_the_knots_slot_is_refused() -> None:
    with pytest.raises(LayoutError, match="support.knots"):
        AtomShape(51, "quantile", 0.25, None, dtype=torch.float32, device="cpu")


def test_an_unknown_spacing_and_a_zero_mix_are_refused() -> None:
    with pytest.raises(ValueError, match="atom_spacing"):
        LearnerConfig(atom_spacing="learned")
    with pytest.raises(ValueError, match="atom_spacing_mix"):
        LearnerConfig(atom_spacing_mix=0.0)


def quantile_learner(make_learner):
    return make_learner(extra=[(support, "support")], atom_spacing="quantile", dtype=torch.float64)


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
    assert step.return_quantiles is None
    learner.update(learner.sample())
    assert not learner.signals[contract.RETURN_QUANTILES].any()


def test_a_tiny_run_with_quantile_spacing_moves_the_knots_and_backtests(tmp_path, monkeypatch) -> None:
    """Through `foxhunt train`: the support kernel moves the knots away from the even spacing, and the fold's
    saved policy (whose ISV carries them) is loaded and backtested."""
    from foxhunt.checkpoint_backtest import load_policy

    out = train_tiny(tmp_path, monkeypatch, "--set", 'learner.atom_spacing="quantile"')
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
