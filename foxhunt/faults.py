"""The first non-finite value of a run, recorded on the device and read at the epoch boundary.

A NaN or an infinity in a loss, a gradient, an ISV slot or a reward poisons
everything computed after it, so the value worth naming is the *first* one.
Checking on the host would cost a synchronisation per step (invariant 3); here
each check is a few device operations that fold into one int64 code:

- every place that can go wrong is registered once, before the hot path, as a
  *source* with a name a user can act on ("loss component c51: loss");
- ``check`` records the lowest-numbered bad element of a tensor, but only while
  no earlier fault is recorded, so the code keeps the first fault of the run (and,
  within one check, the first bad element in registration order);
- ``first`` reads the code back (one host read, at the epoch boundary) and
  returns the source's name.

The checks are plain tensor operations on preallocated tensors, so they are
captured in the training step's CUDA graphs like the rest of the step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["FaultFlag", "FaultSources"]


class FaultSources:
    """A contiguous block of sources checked together: one per element of the tensor a check reads."""

    def __init__(self, first_code: int, names: Sequence[str], device: torch.device) -> None:
        self.names = tuple(names)
        # codes[i] is element i's code: kept on the device so a check adds no host-to-device copy
        self.codes = torch.arange(first_code, first_code + len(self.names), dtype=torch.int64, device=device)


class FaultFlag:
    """Code 0: no fault. Code k > 0: the first non-finite value came from source k."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.code = torch.zeros((), dtype=torch.int64, device=self.device)
        self._names: list[str] = []

    def sources(self, names: Sequence[str]) -> FaultSources:
        """Register one source per element of a tensor that :meth:`check` will read (in element order)."""
        if not names:
            raise ValueError("a fault check needs at least one source")
        block = FaultSources(len(self._names) + 1, names, self.device)
        self._names.extend(block.names)
        return block

    @torch.no_grad()
    def check(self, sources: FaultSources, values: torch.Tensor) -> None:
        """Record the first non-finite element of ``values`` (one per source) unless a fault is already recorded."""
        bad = ~torch.isfinite(values.reshape(-1))
        # argmax returns the first maximal index: the lowest-numbered bad element. index_select, not
        # codes[index]: indexing with a 0-d tensor reads the index back to the host.
        first_bad = sources.codes.index_select(0, torch.argmax(bad.to(torch.int32)).reshape(1)).reshape(())
        record = (self.code == 0) & bad.any()
        self.code.copy_(torch.where(record, first_bad, self.code))

    def first(self) -> str | None:
        """The name of the first source that produced a non-finite value, or ``None`` (reads the device)."""
        code = int(self.code.item())
        return None if code == 0 else self._names[code - 1]

    @torch.no_grad()
    def clear(self) -> None:
        self.code.zero_()
