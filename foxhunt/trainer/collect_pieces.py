"""Collection's torch work, the two halves around the environment step, as module-level functions.

The env step between them is a numba kernel, which dynamo cannot trace, so acting and storing are compiled
(or run eagerly) apart. Module-level, so a second trainer of the same shape reuses the compiled code.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

import torch

from foxhunt.learner.update_pieces import REPRODUCIBLE_COMPILE

if TYPE_CHECKING:
    from foxhunt.trainer.trainer import Trainer

__all__ = ["CollectPieces", "EAGER_COLLECT_PIECES", "compiled_collect_pieces"]


def _act(trainer: Trainer, obs: torch.Tensor) -> torch.Tensor:
    return trainer._act(obs)


def _store(trainer: Trainer, actions: torch.Tensor, reward: torch.Tensor, obs: torch.Tensor,
           done: torch.Tensor) -> None:
    trainer._store(actions, reward, obs, done)


@dataclasses.dataclass(frozen=True)
class CollectPieces:
    """The acting half (``act(trainer, obs) -> actions``) and the storing half of one collect step."""

    act: Any
    store: Any


EAGER_COLLECT_PIECES = CollectPieces(_act, _store)


@functools.cache
def compiled_collect_pieces() -> CollectPieces:
    """Both halves compiled, made on first use (dynamo's import is slow). fullgraph: a graph break must fail,
    not fall back to eager; kernels chosen without timing them, so a busier GPU does not change what one seed
    collects."""
    return CollectPieces(*(torch.compile(piece, fullgraph=True, dynamic=False, options=REPRODUCIBLE_COMPILE)
                           for piece in (_act, _store)))
