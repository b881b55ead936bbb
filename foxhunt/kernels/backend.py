"""Where a kernel runs, and how torch tensors reach it without a copy.

Three backends share one kernel body:

- ``cpu``: ``numba.njit(parallel=True)``; CPU tensors are handed over as the
  numpy arrays that ``Tensor.numpy()`` returns, which share the tensor's memory.
- ``cuda``: ``numba.cuda.jit``; CUDA tensors are handed over through
  ``__cuda_array_interface__`` and the kernel is launched on torch's *current*
  stream, so it orders with torch work and can be captured in a CUDA graph.
- ``cudasim``: the same CUDA kernel run by numba's CUDA simulator on CPU
  tensors. It needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is first imported
  and is about 1e5 times slower: tiny inputs only (tests compare it with ``cpu``).
"""

from __future__ import annotations

import enum
import os

import torch

__all__ = ["Backend", "resolve_backend", "simulator_enabled", "concrete_device"]


class Backend(enum.StrEnum):
    """Which compiled form of a kernel runs."""

    CPU = "cpu"
    CUDA = "cuda"
    CUDASIM = "cudasim"


def simulator_enabled() -> bool:
    """Whether numba's CUDA simulator is switched on for this process."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


def concrete_device(device: torch.device | str) -> torch.device:
    """``device`` with its index filled in: ``cuda`` becomes ``cuda:N`` (the current GPU).

    Tensors always report an indexed device, so comparing them with a bare
    ``cuda`` would fail; every place that checks devices uses this form.
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def resolve_backend(device: torch.device | str, requested: Backend | str | None = None) -> Backend:
    """The backend for tensors on ``device``, checking an explicit request against it.

    With no request a CUDA device runs ``cuda`` and anything else ``cpu``.
    ``cudasim`` runs on CPU tensors and only when the simulator is enabled.
    """
    device = torch.device(device)
    if requested is None:
        return Backend.CUDA if device.type == "cuda" else Backend.CPU
    backend = Backend(requested)
    if backend is Backend.CUDA and device.type != "cuda":
        raise ValueError(f"backend 'cuda' needs CUDA tensors, got device {device}; use backend 'cpu'")
    if backend in (Backend.CPU, Backend.CUDASIM) and device.type != "cpu":
        raise ValueError(f"backend {backend.value!r} needs CPU tensors, got device {device}")
    if backend is Backend.CUDASIM and not simulator_enabled():
        raise ValueError(
            "backend 'cudasim' needs the numba CUDA simulator: set NUMBA_ENABLE_CUDASIM=1 "
            "in the environment before anything imports numba"
        )
    return backend
