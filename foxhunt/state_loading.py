"""Loading a state dict into live tensors in place: every name, shape and dtype checked before the first copy.

Objects that hold resumable state (the learner, the vector environment, the explorer, the trainer's own
counters, a saved policy) give ``state_dict()`` as their live tensors by name and load one back through
:func:`load_in_place`. The copy is in place so that the addresses a captured CUDA graph or a kernel context
bound stay valid. The checks come first because ``copy_`` would broadcast a wrong shape or cast a wrong dtype
without a word, and a load refused halfway would leave the object half old, half new.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from foxhunt.errors import CheckpointError

__all__ = ["check_state", "load_in_place"]


def check_state(live: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], what: str, hint: str) -> None:
    """Refuse ``state`` unless it has exactly ``live``'s names, each with its shape and dtype."""
    missing, unexpected = sorted(set(live) - set(state)), sorted(set(state) - set(live))
    if missing or unexpected:
        raise CheckpointError(f"{what} does not match: missing {missing[:8]}, unexpected {unexpected[:8]}; {hint}")
    for name, tensor in live.items():
        if tensor.shape != state[name].shape or tensor.dtype != state[name].dtype:
            raise CheckpointError(
                f"{what} {name!r} is {state[name].dtype} {tuple(state[name].shape)}, expected "
                f"{tensor.dtype} {tuple(tensor.shape)}; {hint}"
            )


@torch.no_grad()
def load_in_place(live: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], what: str, hint: str) -> None:
    """Copy ``state`` into the ``live`` tensors (on their own devices) once all of it is checked."""
    check_state(live, state, what, hint)
    for name, tensor in live.items():
        tensor.detach().copy_(state[name])
