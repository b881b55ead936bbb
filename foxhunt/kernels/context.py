"""What every kernel receives: where it runs, the ISV, and the named tensors it works on."""

from __future__ import annotations

from typing import Any

import attrs
import torch

from foxhunt.kernels.backend import Backend, concrete_device

__all__ = ["KernelContext"]


def _signals(value: Any) -> dict[str, torch.Tensor]:
    return dict(value)


@attrs.frozen
class KernelContext:
    """The inputs of one kernel launch, built once and reused at every launch.

    ``isv`` is the ISV's device buffer and ``layout`` its layout (anything with
    ``offset(name)`` and ``width(name)``); kernels that do not touch the ISV get
    ``None`` for both. ``signals`` names the other device tensors a kernel reads
    or writes (the environment's buffers, a learner statistic, ...). ``step`` is
    a device counter (``int64``, one element) for kernels that need one: counter
    based random draws read it on the device, so a captured CUDA graph sees a
    new value at every replay without a Python scalar changing.

    The tensors are held by reference: writing into them in place between
    launches is how values change, which keeps launches free of host syncs.
    """

    device: torch.device = attrs.field(converter=concrete_device)
    backend: Backend = attrs.field(converter=Backend)
    isv: torch.Tensor | None = None
    layout: Any = None
    signals: dict[str, torch.Tensor] = attrs.field(factory=dict, converter=_signals)
    step: torch.Tensor | None = None

    def signal(self, name: str) -> torch.Tensor:
        """The signal tensor ``name``, with an error that lists what is there."""
        try:
            return self.signals[name]
        except KeyError:
            known = ", ".join(sorted(self.signals)) or "none"
            raise KeyError(f"kernel context has no signal {name!r} (signals: {known})") from None

    def isv_slot(self, name: str) -> torch.Tensor:
        """A zero-copy view of ISV slot ``name`` (``[width]``)."""
        if self.isv is None or self.layout is None:
            raise KeyError(f"kernel context has no ISV, so slot {name!r} cannot be read")
        offset = self.layout.offset(name)
        return self.isv[offset : offset + self.layout.width(name)]
