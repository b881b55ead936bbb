"""Shared plumbing of the adaptive kernels (not a plugin): binding a launch to a context, device helpers.

Every adaptive kernel is a :class:`~foxhunt.kernels.DualKernel` over a handful
of values. Its launch needs the ISV buffer, an ``int64`` vector of slot
offsets (named by a per-kernel ``DimTable``), a ``float64`` parameter vector
made from the config, and the signal tensors it reads. :class:`BoundRun` builds
those once per :class:`~foxhunt.kernels.KernelContext` (the first launch is
the warm-up) and afterwards only launches: no allocation, no host sync and no
changing Python scalar on the hot path (invariant 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from foxhunt import Branch
from foxhunt.kernels import KernelContext, device_function

__all__ = [
    "MISSING",
    "N_BRANCHES",
    "BoundRun",
    "slot_offsets",
    "param_tensor",
    "signal_of",
    "step_of",
    "read_or",
    "clamp",
]

MISSING = -1  # offset of an optional slot that the layout does not have: the kernel uses a default
N_BRANCHES = len(Branch)
_MAX_BOUND_CONTEXTS = 8


def slot_offsets(context: KernelContext, names: Sequence[str], optional: Sequence[str] = ()) -> torch.Tensor:
    """``int64 [len(names)]`` offsets of ``names`` in the ISV; names in ``optional`` may be absent (``MISSING``)."""
    if context.isv is None or context.layout is None:
        raise KeyError("adaptive kernels need the ISV: build the KernelContext with isv= and layout=")
    offsets = []
    for name in names:
        if name in optional and name not in context.layout.offsets:
            offsets.append(MISSING)
        else:
            offsets.append(context.layout.offset(name))
    return torch.tensor(offsets, dtype=torch.int64, device=context.device)


def param_tensor(values: Sequence[float] | Sequence[Sequence[float]], context: KernelContext) -> torch.Tensor:
    """A ``float64`` parameter vector (or ``[rows, fields]`` table) on the context's device."""
    return torch.tensor(values, dtype=torch.float64, device=context.device)


def signal_of(context: KernelContext, name: str, shape: tuple[int, ...], kernel: str) -> torch.Tensor:
    """Signal ``name`` as a tensor of ``shape`` (a zero-copy view; a 0-d scalar becomes ``[1]``)."""
    tensor = context.signal(name)
    if tensor.numel() != _numel(shape) or (len(shape) > 1 and tuple(tensor.shape) != shape):
        raise ValueError(
            f"kernel {kernel!r}: signal {name!r} must have shape {list(shape)}, got {list(tensor.shape)} "
            "(see docs/adaptive.md for every signal an adaptive kernel reads)"
        )
    if tensor.device != context.device:
        raise ValueError(f"kernel {kernel!r}: signal {name!r} is on {tensor.device}, the kernel runs on {context.device}")
    return tensor.reshape(shape)


def step_of(context: KernelContext) -> torch.Tensor:
    """The context's vector-step counter (``int64 [1]``, advanced by the trainer after every vector step)."""
    if context.step is None:
        raise KeyError("this kernel counts the fold's transitions: build the KernelContext with step= (the trainer's counter)")
    if context.step.device != context.device:
        raise ValueError(f"the step counter is on {context.step.device}, the kernel runs on {context.device}")
    return context.step.reshape(1)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


class BoundRun:
    """``Kernel.run`` for one adaptive kernel: binds its tensors at a context's first launch, then launches.

    ``bind(context)`` returns the launches as ``[(dual_kernel, rows, tensors), ...]``;
    they run in order on ``context.backend``.
    """

    def __init__(self, bind: Callable[[KernelContext], list[tuple[Any, int, tuple[torch.Tensor, ...]]]]) -> None:
        self._bind = bind
        self._bound: dict[int, tuple[KernelContext, list[tuple[Any, int, tuple[torch.Tensor, ...]]]]] = {}

    def __call__(self, context: KernelContext) -> None:
        entry = self._bound.get(id(context))
        if entry is None or entry[0] is not context:
            if len(self._bound) >= _MAX_BOUND_CONTEXTS:
                self._bound.pop(next(iter(self._bound)))
            entry = (context, self._bind(context))
            self._bound[id(context)] = entry
        for dual, rows, tensors in entry[1]:
            dual.launch(context.backend, rows, tensors)


@device_function
def read_or(isv, offset, default):
    """ISV value at ``offset``, or ``default`` when the slot is ``MISSING`` from the layout."""
    if offset < 0:
        return default
    return isv[offset]


@device_function
def clamp(x, lo, hi):
    return min(max(x, lo), hi)
