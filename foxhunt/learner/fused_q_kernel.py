"""The fused acting kernel in Triton: imported only on CUDA, where torch brings Triton with it.

:mod:`foxhunt.learner.fused_q` decides when to use it and holds the torch reference it must agree with.
This module registers one custom op, ``foxhunt::expected_q``, so ``torch.compile`` (``fullgraph``) traces the
call as one node and a CUDA graph captures its launch like any other kernel.

One program takes ``BLOCK_B`` samples of one branch. It loads their advantage-stream hidden rows
``[BLOCK_B, HH]`` and their dueling values ``[BLOCK_B, N]`` once, then for each action multiplies the rows by
that action's (centred) weight rows ``[N, HH]`` on the tensor cores, adds the bias and the value, and reduces
the atoms at once: ``q = Σ_j softmax(logits)_j · z_j``, with the row maximum subtracted before ``exp``. The
logits never leave the multiprocessor: the only writes are ``Branch × A`` values per sample.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

__all__ = ["expected_q"]

BLOCK_B = 64  # samples per program: a 64-row tile is tl.dot's natural size, and keeps 4 warps busy


@triton.jit
def _expected_q_kernel(adv_ptr, weight_ptr, bias_ptr, value_ptr, support_ptr, q_ptr, batch,
                       N: tl.constexpr, HH: tl.constexpr, A: tl.constexpr, BRANCHES: tl.constexpr,
                       BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       PRECISION: tl.constexpr):
    block = tl.program_id(0)
    branch = tl.program_id(1)
    rows = block * BLOCK_B + tl.arange(0, BLOCK_B)
    atoms = tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    row_ok = rows < batch
    atom_ok = atoms < N
    k_ok = ks < HH
    # adv [batch, BRANCHES, HH], value [batch, BRANCHES, N], q [batch, BRANCHES, A]: contiguous
    x = tl.load(adv_ptr + (rows[:, None] * BRANCHES + branch) * HH + ks[None, :],
                mask=row_ok[:, None] & k_ok[None, :], other=0.0)
    value = tl.load(value_ptr + (rows[:, None] * BRANCHES + branch) * N + atoms[None, :],
                    mask=row_ok[:, None] & atom_ok[None, :], other=0.0)
    z = tl.load(support_ptr + branch * N + atoms, mask=atom_ok, other=0.0)
    for action in tl.static_range(A):
        # weight [BRANCHES, A * N, HH], bias [BRANCHES, A * N]: contiguous
        first_row = branch * A * N + action * N
        w = tl.load(weight_ptr + (first_row + atoms[:, None]) * HH + ks[None, :],
                    mask=atom_ok[:, None] & k_ok[None, :], other=0.0)
        bias = tl.load(bias_ptr + first_row + atoms, mask=atom_ok, other=0.0)
        logits = tl.dot(x, tl.trans(w), input_precision=PRECISION) + bias[None, :] + value
        logits = tl.where(atom_ok[None, :], logits, float("-inf"))
        peak = tl.max(logits, axis=1)
        e = tl.exp(logits - peak[:, None])
        q = tl.sum(e * z[None, :], axis=1) / tl.sum(e, axis=1)
        tl.store(q_ptr + (rows * BRANCHES + branch) * A + action, q, mask=row_ok)


@triton_op("foxhunt::expected_q", mutates_args=())
def expected_q(adv: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, value: torch.Tensor,
               support: torch.Tensor, tf32: bool) -> torch.Tensor:
    """``q [B, Branch, A]`` from ``adv [B, Branch, HH]``, ``weight [Branch, A*N, HH]``, ``bias [Branch, A*N]``,
    ``value [B, Branch, N]`` and ``support [Branch, N]`` (float32, contiguous, on one CUDA device)."""
    batch, branches, hh = adv.shape
    n_atoms = value.shape[-1]
    n_actions = weight.shape[1] // n_atoms
    q = torch.empty((batch, branches, n_actions), dtype=adv.dtype, device=adv.device)
    grid = (triton.cdiv(batch, BLOCK_B), branches)
    wrap_triton(_expected_q_kernel)[grid](
        adv, weight, bias, value, support, q, batch,
        N=n_atoms, HH=hh, A=n_actions, BRANCHES=branches,
        BLOCK_B=BLOCK_B, BLOCK_N=max(16, triton.next_power_of_2(n_atoms)),
        BLOCK_K=max(16, triton.next_power_of_2(hh)),
        PRECISION="tf32" if tf32 else "ieee",
    )
    return q
