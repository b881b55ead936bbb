"""The C51 head's closed-form backward against autograd of the plain expression, in float64 on fresh inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.learner.atom_softmax import log_softmax_expectation, log_softmax_expectation_reference


def random_head(seed: int, per_sample_atoms: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits ``[B, Branch, A, N]`` of every scale the head sees, and sorted atoms, shared or one set per sample."""
    rng = np.random.default_rng(seed)
    batch, branches, actions = (int(v) for v in rng.integers(1, 6, 3))
    n_atoms = int(rng.integers(2, 52))
    logits = torch.tensor(rng.normal(0.0, rng.uniform(0.1, 8.0), (batch, branches, actions, n_atoms)))
    rows = (batch, branches) if per_sample_atoms else (1, branches)
    atoms = torch.tensor(np.sort(rng.uniform(-3.0, 3.0, (*rows, n_atoms)), axis=-1))[:, :, None, :]
    return logits, atoms


def cotangents(seed: int, logits: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` cotangents of (log_probs, q): sparse ones like C51's (the taken action only) mixed with dense."""
    rng = np.random.default_rng(seed + 1)
    grad_log_probs = torch.tensor(rng.normal(size=(count, *logits.shape)))
    grad_log_probs = grad_log_probs * torch.tensor(rng.uniform(size=(count, *logits.shape[:-1], 1)) < 0.5)
    grad_q = torch.tensor(rng.normal(size=(count, *logits.shape[:-1])))
    return grad_log_probs, grad_q


@given(seed=st.integers(0, 2**32 - 1), per_sample_atoms=st.booleans())
def test_the_forward_is_the_plain_expression_exactly(seed: int, per_sample_atoms: bool) -> None:
    logits, atoms = random_head(seed, per_sample_atoms)
    for got, want in zip(log_softmax_expectation(logits, atoms), log_softmax_expectation_reference(logits, atoms),
                         strict=True):
        assert torch.equal(got, want)


@given(seed=st.integers(0, 2**32 - 1), per_sample_atoms=st.booleans())
def test_the_closed_form_gradient_matches_autograd_of_the_plain_expression(seed: int, per_sample_atoms: bool) -> None:
    logits, atoms = random_head(seed, per_sample_atoms)
    grad_log_probs, grad_q = cotangents(seed, logits, 1)
    grads = []
    for head in (log_softmax_expectation, log_softmax_expectation_reference):
        x = logits.clone().requires_grad_(True)
        log_probs, q = head(x, atoms)
        (grad,) = torch.autograd.grad((log_probs * grad_log_probs[0]).sum() + (q * grad_q[0]).sum(), x)
        grads.append(grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-12)


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 4))
def test_the_vmapped_vjp_gives_each_cotangent_its_own_gradient(seed: int, count: int) -> None:
    """The compiled update's form: one ``torch.func.vjp`` vmapped over the C51 group's cotangents."""
    logits, atoms = random_head(seed, per_sample_atoms=False)
    grad_log_probs, grad_q = cotangents(seed, logits, count)
    _, vjp = torch.func.vjp(lambda x: log_softmax_expectation(x, atoms), logits)
    (batched,) = torch.vmap(vjp)((grad_log_probs, grad_q))
    for k in range(count):
        x = logits.clone().requires_grad_(True)
        log_probs, q = log_softmax_expectation_reference(x, atoms)
        (want,) = torch.autograd.grad((log_probs * grad_log_probs[k]).sum() + (q * grad_q[k]).sum(), x)
        torch.testing.assert_close(batched[k], want, rtol=1e-10, atol=1e-12)


def test_an_unused_output_contributes_no_gradient() -> None:
    """A loss of the expected value alone (mse, cql) or of the log-probabilities alone (c51)."""
    logits, atoms = random_head(7, per_sample_atoms=True)
    for pick in (0, 1):
        grads = []
        for head in (log_softmax_expectation, log_softmax_expectation_reference):
            x = logits.clone().requires_grad_(True)
            (grad,) = torch.autograd.grad(head(x, atoms)[pick].sin().sum(), x)
            grads.append(grad)
        torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-12)


def test_atoms_that_require_grad_are_refused_rather_than_left_without_a_gradient() -> None:
    logits, atoms = random_head(3, per_sample_atoms=False)
    with pytest.raises(ValueError, match="does not differentiate the atoms"):
        log_softmax_expectation(logits, atoms.requires_grad_(True))
