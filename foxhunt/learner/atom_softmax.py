"""The C51 head's log-probabilities and expected value over atoms, with its backward written in closed form.

The compiled update differentiates the C51 group's three losses (c51, mse, cql) at once: one ``torch.func.vjp``
vmapped over three cotangents (:mod:`foxhunt.learner.functional`). Left to autograd, the backward of
``log_softmax`` followed by ``q = Σ exp(log_probs) · z`` keeps separate ``[3, B, Branch, A, N]`` buffers for
each path into the logits (the expectation's product, the log-softmax's sum) and reads them back several times:
on one H200 at batch 8 192 those passes were the largest kernels of the update (docs/learner.md,
"Performance"). Written by hand the gradient is one expression over a row of atoms::

    ∂L/∂x = g_lp − p · (Σ_j g_lp_j − g_q · (z − q))        p = exp(log_probs)

(``g_lp``, ``g_q``: the cotangents of the log-probabilities and of the expected value), which inductor fuses
into one pass. Only the compiled update uses it (``[learner] compile``, :attr:`BranchingNetwork.closed_form_backward`):
the eager path keeps autograd's composition, whose rounding its pinned results were measured with.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

__all__ = ["log_softmax_expectation", "log_softmax_expectation_reference"]


class _LogSoftmaxExpectation(torch.autograd.Function):
    # the forward and backward are plain torch ops, so torch.func derives the batched rule (the vmapped vjp)
    generate_vmap_rule = True

    @staticmethod
    def forward(logits: torch.Tensor, atoms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return log_softmax_expectation_reference(logits, atoms)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor, torch.Tensor], output: tuple[torch.Tensor, ...]) -> None:
        log_probs, q = output
        ctx.save_for_backward(log_probs, q, inputs[1])

    @staticmethod
    def backward(ctx: Any, grad_log_probs: torch.Tensor, grad_q: torch.Tensor) -> tuple[torch.Tensor, None]:
        log_probs, q, atoms = ctx.saved_tensors
        probs = log_probs.exp()
        inner = grad_log_probs.sum(-1, keepdim=True) - grad_q[..., None] * (atoms - q[..., None])
        return grad_log_probs - probs * inner, None  # the atoms are coordinates: no loss moves them


def log_softmax_expectation_reference(logits: torch.Tensor, atoms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log_softmax(logits), Σ softmax(logits) · atoms)`` over the last axis, differentiated by autograd."""
    log_probs = F.log_softmax(logits, dim=-1)
    return log_probs, (log_probs.exp() * atoms).sum(-1)


def log_softmax_expectation(logits: torch.Tensor, atoms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`log_softmax_expectation_reference`'s values, differentiated by the closed form above.

    ``logits [..., N]``; ``atoms`` broadcastable to them and not differentiated (the support is never learnt by
    gradient through the losses). Returns ``log_probs [..., N]`` and the expected value ``[...]``."""
    if atoms.requires_grad:  # the backward returns no gradient for them: refuse rather than drop one silently
        raise ValueError("log_softmax_expectation does not differentiate the atoms; "
                         "use log_softmax_expectation_reference for atoms that require grad")
    return _LogSoftmaxExpectation.apply(logits, atoms)
