"""ISV context: ISV slots the network reads as inputs (``[learner] isv_context``), beside the observation.

``[learner] isv_context = ["health.value", "epsilon.branch"]`` appends those slots' lanes, in that order, to every
encoder input: :meth:`foxhunt.learner.network.BranchingNetwork.encoder_input` reads them from the live ISV at
each forward and repeats them for every sample, so the encoder input is ``[B, window × F + P + C]`` with ``C``
the slots' summed width. Empty (the default), nothing is appended and the network is exactly the one without
context.

What the values mean: the state of the learning system at the moment of the forward (how healthy training is,
how much the agent explores, where the supports sit), not a property of a stored transition. Acting and the
update read the same live lanes, so at every moment the network sees one context for every sample, the context
it acts under; a replayed transition is evaluated under the context of the update, not the one it was collected
under. A saved policy reads the ISV it was saved with, so its context is frozen with it.

The ``vsn`` encoder makes the context one variable of its own, the ``ISV_CONTEXT`` feature group: its per-group
selection weights say how much the agent leans on its own training state against the market.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from foxhunt.errors import LayoutError
from foxhunt.isv import IsvLayout

__all__ = ["IsvContext", "context_lanes"]


def context_lanes(layout: IsvLayout, names: Sequence[str]) -> list[int]:
    """The ISV lanes of slots ``names``, slot by slot in that order; a :class:`LayoutError` for a slot no loaded
    plugin declares, naming it and the declared ones."""
    missing = [name for name in names if name not in layout.offsets]
    if missing:
        raise LayoutError(f"[learner] isv_context names ISV slots no loaded plugin declares: {missing}; declared "
                          f"slots: {sorted(layout.offsets)}")
    lanes: list[int] = []
    for name in names:
        span = layout.span(name)
        lanes.extend(range(span.start, span.stop))
    return lanes


class IsvContext:
    """The context lanes of a live ISV buffer: calling it reads them, ``[C]`` in the buffer's dtype.

    ``width`` is ``C``. A network holding one shares it with its copies (``copy.deepcopy`` returns the same
    object): the learner's target network reads the same live lanes as the online one, never a frozen copy.
    """

    def __init__(self, isv: torch.Tensor, layout: IsvLayout, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.isv = isv
        self.index = torch.tensor(context_lanes(layout, self.names), dtype=torch.int64, device=isv.device)
        self.width = int(self.index.numel())

    def __call__(self) -> torch.Tensor:
        return self.isv.index_select(0, self.index)

    def __deepcopy__(self, memo: dict) -> IsvContext:
        return self  # a read of the live ISV, not state: copies of the network read the same lanes
