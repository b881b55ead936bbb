"""One epoch's ``metrics.jsonl`` row, read from the trainer's device state at the epoch boundary.

The row is what the report, the regression bands and TensorBoard read back
(docs/report.md, docs/bands.md); reading it copies every device value to the host once per epoch, never
inside the training step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from foxhunt.actions import BRANCH_TABLES, Branch

if TYPE_CHECKING:  # the trainer imports this module
    from foxhunt.trainer.trainer import Trainer

__all__ = ["epoch_metrics_row"]


def epoch_metrics_row(trainer: Trainer, fold: int, epoch: int, stats: dict[str, float], validation: dict[str, float],
                      diagnostics: list[dict[str, Any]], encoder: dict[str, float]) -> dict[str, Any]:
    """One epoch's ``metrics.jsonl`` row: losses, budgets and gradient norms, the adaptive ISV slots, validation
    figures, action counts per branch, timings and device memory (``stats``: the epoch's collection timings;
    ``encoder``: the encoder's diagnostics, :meth:`foxhunt.learner.Learner.encoder_epoch`)."""
    metrics = {name: tensor.detach().cpu().numpy() for name, tensor in trainer.learner.metrics().items()}
    losses = {name.removeprefix("loss."): float(v) for name, v in metrics.items() if name.startswith("loss.")}
    grad_norms = {name.removeprefix("grad_norm."): float(v) for name, v in metrics.items() if name.startswith("grad_norm.")}
    clipped = {
        name.removeprefix("grad_norm_clipped."): float(v)
        for name, v in metrics.items()
        if name.startswith("grad_norm_clipped.")
    }
    view = trainer.isv.snapshot()
    adaptive = {
        slot.name: [float(v) for v in view[slot.name]] if slot.width > 1 else float(view[slot.name][0])
        for slot in trainer.layout.slots
        if slot.owner not in ("foxhunt",)
    }
    counts = trainer.action_counts.cpu().numpy()
    actions = {}
    offset = 0
    for branch in Branch:
        names = BRANCH_TABLES[branch].names()
        actions[branch.name] = {name: float(counts[offset + i]) for i, name in enumerate(names)}
        offset += len(names)
    return {
        "fold": fold,
        "epoch": epoch,
        "losses": losses,
        "budgets": {c.name: b for c, b in zip(trainer.learner.components, trainer.learner.budgets, strict=True)},
        "grad_norms": grad_norms,
        "grad_norms_clipped": clipped,
        "safety_clips": float(metrics["grad.safety_clips"]),
        "adaptive": adaptive,
        "validation": validation,
        "actions": actions,
        "env_steps_per_s": stats["env_steps_per_s"],
        "updates_per_s": stats["updates_per_s"],
        "updates": stats["updates"],
        "seconds": stats["seconds"],
        "validation_seconds": stats["validation_seconds"],
        "first_update_seconds": trainer.first_update_seconds,
        "peak_device_memory_bytes": (
            torch.cuda.max_memory_allocated(trainer.device) if trainer.device.type == "cuda" else None
        ),
        "diagnostics": diagnostics,
        # the encoder's own numbers (Encoder.diagnostics, e.g. vsn's selection weights); {} for most encoders
        "encoder": encoder,
    }
