"""Acting's expected Q on CUDA in one kernel, and the choice of when to use it.

Collection asks the network for ``E[Z]`` of every action in every environment at every vector step. In torch
that is two passes over ``B × Branch × A × N`` floats: the advantage layer writes the logits, and a softmax
over atoms reads them back (at 65,536 environments, 214 MB each way, most of a collect step's GPU time;
docs/learner.md, "Acting reads the expected Q alone"). The Triton kernel in
:mod:`foxhunt.learner.fused_q_kernel` keeps the logits on chip: it reads the advantage stream's hidden rows
and the dueling values and writes ``Branch × A`` numbers per sample.

It is used where it applies (:func:`applies`: float32 tensors on a CUDA device with Triton importable, and
``[learner] fused_acting``, on by default, which the network reads) and the torch expression it replaces is used
everywhere else, the CPU path included, so that path is unchanged.
:func:`torch_expected_q` is that expression; ``tests_gpu/test_fused_q.py`` checks the kernel against a float64
transcription of it. :func:`load` imports the kernel; the learner calls it when it is built on CUDA, before
anything is compiled (``torch.compile`` does not trace the import), and any later eager call on CUDA loads it
on first use.
"""

from __future__ import annotations

from types import ModuleType

import torch

__all__ = ["load", "applies", "expected_q", "torch_logits", "torch_expected_q"]

_kernel: ModuleType | None = None
_tried = False
_tf32_hardware = False  # TF32 tensor cores (compute capability 8.0 and up) on the device the kernel was loaded for


def load() -> bool:
    """Import the Triton kernel once (Triton comes with torch's CUDA builds); whether it is there."""
    global _kernel, _tried, _tf32_hardware
    if not _tried:
        _tried = True
        try:
            from foxhunt.learner import fused_q_kernel
        except ImportError:  # a torch build without Triton: the torch expression serves
            fused_q_kernel = None
        _kernel = fused_q_kernel
        _tf32_hardware = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8
    return _kernel is not None


def applies(h: torch.Tensor, support: torch.Tensor) -> bool:
    """Whether acting on trunk features ``h`` over ``support [Branch, N]`` runs the fused kernel."""
    if not (h.is_cuda and h.dtype == torch.float32 and support.dtype == torch.float32 and support.dim() == 2):
        return False
    if _kernel is None and not _tried and not torch.compiler.is_compiling():
        load()
    return _kernel is not None


def expected_q(adv_h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, value: torch.Tensor,
               support: torch.Tensor) -> torch.Tensor:
    """The fused kernel: ``q [B, Branch, A]`` from the advantage stream's hidden rows ``adv_h [B, Branch, hh]``,
    the centred advantage layer (``weight [Branch, A*N, hh]``, ``bias [Branch, A*N]``), the dueling values
    ``value [B, Branch, 1, N]`` and ``support [Branch, N]``. The matmul runs in TF32 when torch's are allowed to
    (``torch.backends.cuda.matmul.allow_tf32``, which the trainer sets from ``[run] tf32``) and the GPU has TF32
    tensor cores; otherwise in full float32."""
    if _kernel is None:
        raise RuntimeError("the fused expected-Q kernel is not loaded: check foxhunt.learner.fused_q.applies first")
    batch, branches, n_atoms = value.shape[0], value.shape[1], value.shape[-1]
    return _kernel.expected_q(adv_h.contiguous(), weight.contiguous(), bias.contiguous(),
                              value.reshape(batch, branches, n_atoms).contiguous(), support.contiguous(),
                              bool(torch.backends.cuda.matmul.allow_tf32) and _tf32_hardware)


def torch_logits(adv_h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """The acting logits ``[B, Branch, A, N]`` in torch: the centred advantage layer on ``adv_h`` plus ``value``."""
    batch, branches, n_atoms = value.shape[0], value.shape[1], value.shape[-1]
    advantage = torch.einsum("bgi,goi->bgo", adv_h, weight) + bias
    return value + advantage.view(batch, branches, -1, n_atoms)


def torch_expected_q(adv_h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, value: torch.Tensor,
                     support: torch.Tensor) -> torch.Tensor:
    """:func:`expected_q` in torch (any device and dtype): the logits, the softmax over atoms, the expectation."""
    probs = torch.softmax(torch_logits(adv_h, weight, bias, value), dim=-1)
    return (probs * support[None, :, None, :]).sum(-1)
