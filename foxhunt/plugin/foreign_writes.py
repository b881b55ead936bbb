"""Kernels write only their own slots: each kernel runs once on a scratch copy of the ISV before training.

``Kernel.writes`` is a declaration, and the host checks it names only slots
the kernel's own plugin declared (:meth:`foxhunt.plugin.host.PluginHost.kernels`).
What a kernel actually writes is only known by running it: a kernel that
writes another plugin's slot (a misspelt offset, a slot name it should only
read) would silently fight that plugin for the value during the whole run.
So the trainer, once its kernel context exists and before the first real
launch, runs every kernel once against a scratch context (copies of the ISV,
of every signal and of the step counter, on the run's own device and
backend: the very code the run launches, compiled once either way) and
compares the ISV's bits before and after each launch. A slot that changed and
is not in the kernel's ``writes`` refuses the run, one paragraph per kernel.
The conformance machine (:mod:`foxhunt.testing.conformance`) applies the same
comparison, :func:`changed_slots`, after every launch of its random sequences.

The run's own tensors are never touched: every kernel binds the scratch
context, and the scratch copies are released when the check ends. A write
that leaves a slot bit-identical (the same value as the slot's ``init``) is
not seen; the conformance machine's random sequences are where that shows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import structlog
import torch

from foxhunt.errors import PluginError, PluginProblem
from foxhunt.kernels.context import KernelContext
from foxhunt.plugin.records import Kernel

__all__ = ["slot_bits", "changed_slots", "scratch_context", "refuse_foreign_writes"]

log = structlog.get_logger(__name__)


def slot_bits(isv: torch.Tensor, layout: Any) -> dict[str, torch.Tensor]:
    """Every slot's values as int32 bits on the host: NaN payloads and -0.0 count, as they do in a checkpoint."""
    bits = isv.detach().cpu().contiguous().view(torch.int32).clone()
    return {slot.name: bits[layout.offsets[slot.name] : layout.offsets[slot.name] + slot.width] for slot in layout.slots}


def changed_slots(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> list[str]:
    """Names of the slots whose bits differ between two :func:`slot_bits` snapshots, sorted."""
    return sorted(name for name in before if not torch.equal(before[name], after[name]))


def scratch_context(context: KernelContext) -> KernelContext:
    """A context like ``context`` whose ISV, signals and step counter are copies: launches on it change nothing of
    the run."""
    return KernelContext(
        device=context.device,
        backend=context.backend,
        isv=None if context.isv is None else context.isv.clone(),
        layout=context.layout,
        signals={name: tensor.clone() for name, tensor in context.signals.items()},
        step=None if context.step is None else context.step.clone(),
    )


def _problem(kernel: Kernel, owner: Any, message: str) -> PluginProblem:
    return PluginProblem(owner.name, owner.distribution, owner.version, f"kernel {kernel.name!r} ({kernel.point}) {message}")


def refuse_foreign_writes(kernels: Sequence[Kernel], owners: dict[str, Any], context: KernelContext) -> float:
    """Run each kernel once on a scratch copy of ``context``; a write outside its ``writes`` raises ``PluginError``.

    ``owners`` maps a kernel name to its plugin's :class:`~foxhunt.plugin.host.PluginInfo` (name, distribution,
    version, for the message). Returns the seconds the check took.
    """
    started = time.perf_counter()
    layout = context.layout
    scratch = scratch_context(context)
    problems: list[PluginProblem] = []
    try:
        for kernel in kernels:
            owner = owners[kernel.name]
            before = slot_bits(scratch.isv, layout)
            try:
                kernel.run(scratch)
            except Exception as error:  # reported with the plugin named, like every other plugin problem
                problems.append(_problem(
                    kernel, owner,
                    f"raised {type(error).__name__}: {error} when run once on a scratch copy of the ISV before "
                    "training; fix the kernel (every signal it reads must be in its reads and in foxhunt.contract) "
                    "or disable the plugin in [plugins]",
                ))
                continue
            foreign = [name for name in changed_slots(before, slot_bits(scratch.isv, layout)) if name not in kernel.writes]
            if foreign:
                slots = ", ".join(f"{name!r} (declared by plugin {layout.slot(name).owner!r})" for name in foreign)
                problems.append(_problem(
                    kernel, owner,
                    f"wrote ISV slot(s) {slots} outside its writes={list(kernel.writes)} when run once on a scratch "
                    "copy of the ISV before training; a kernel may change only the slots its own plugin declares and "
                    "lists in writes: read that slot instead of writing it, or declare a slot of your own "
                    "(registrar.slot) and write that, or disable the plugin in [plugins]",
                ))
    finally:
        scratch.signals.clear()  # a kernel that keeps its bound context must not keep the copies alive
    seconds = time.perf_counter() - started
    log.debug("kernel writes checked on a scratch ISV", kernels=len(kernels), seconds=round(seconds, 4))
    if problems:
        raise PluginError(problems)
    return seconds
