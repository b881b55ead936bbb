"""Replay augmentations: plugin records applied to every sampled batch, on the learner's hot path.

A :class:`~foxhunt.plugin.records.ReplayAugmentation` (from the ``foxhunt_replay_augmentations`` hook) replaces a
share ``fraction`` of each sampled batch by augmented copies of the same transitions (the built-ins: the
counterfactual mirror, on by default, and hindsight magnitude relabelling, off). The core's part is here:

- :func:`selected_positions`: which positions of a batch an augmentation replaces, evenly spread: position
  ``i`` when ``i × fraction`` crosses an integer (every odd position at 0.5, every fourth at 0.25);
- :class:`Augmentations`: the run's augmentations with their per-fold constants, kept as device tensors of
  fixed shapes (allocated at the first fold, copied into at every later one, so a captured CUDA graph keeps
  reading the right memory), and :meth:`Augmentations.apply`, which hands each augmentation its inputs in
  name order. Nothing here reads the device from the host: sampling stays capturable.

A replay whose fold was never set (:meth:`Augmentations.set_fold`, called by the trainer at every fold)
applies nothing: a replay filled outside the trainer has no normaliser or environment to prepare from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from foxhunt.plugin.records import AugmentationFold, AugmentationInputs, ReplayAugmentation

__all__ = ["selected_positions", "Augmentations"]


def selected_positions(batch_size: int, fraction: float, device: torch.device | str) -> torch.Tensor:
    """``[B, 1]`` bool: position ``i`` is selected when ``i × fraction`` crosses an integer (evenly spread: the
    sampling strata are in position order, so the selected share is drawn from the whole buffer)."""
    position = torch.arange(batch_size + 1, device=device, dtype=torch.float64)
    crossed = torch.floor(position * fraction)
    return (crossed[1:] > crossed[:-1])[:, None]


class Augmentations:
    """The run's replay augmentations (applied in ``records`` order) and their per-fold tensors."""

    def __init__(self, records: Sequence[ReplayAugmentation], device: torch.device | str, dtype: torch.dtype) -> None:
        self.records = tuple(records)
        self.device, self.dtype = device, dtype
        self.tensors: dict[str, dict[str, torch.Tensor]] = {record.name: {} for record in self.records}
        self.active = False  # set by the first set_fold; fixed from then on: no data-dependent branch

    @torch.no_grad()
    def set_fold(self, fold: AugmentationFold) -> None:
        """Each augmentation's constants for ``fold``, copied into the tensors of the previous fold (same shapes)."""
        for record in self.records:
            if record.prepare is None:
                continue
            held = self.tensors[record.name]
            for key, value in dict(record.prepare(fold)).items():
                array = np.asarray(value)
                dtype = self.dtype if np.issubdtype(array.dtype, np.floating) else \
                    torch.bool if array.dtype == np.bool_ else torch.int64
                tensor = torch.as_tensor(array).to(device=self.device, dtype=dtype)
                if key not in held:
                    held[key] = tensor.clone()
                elif held[key].shape != tensor.shape:
                    raise ValueError(
                        f"replay augmentation {record.name!r}: prepare gave {key!r} the shape {tuple(tensor.shape)}, "
                        f"but {tuple(held[key].shape)} at an earlier fold; its shapes must not change between folds"
                    )
                else:
                    held[key].copy_(tensor)
        self.active = bool(self.records)

    def apply(self, batch: Any, rewards: torch.Tensor) -> Any:
        """``batch`` with every augmentation applied to its share; ``rewards [B]`` each transition's one-step reward."""
        if not self.active:
            return batch
        batch_size = rewards.shape[0]
        for record in self.records:
            selected = selected_positions(batch_size, record.fraction, rewards.device)
            batch = record.augment(AugmentationInputs(batch, selected, rewards, self.tensors[record.name]))
        return batch
