"""Checkpoints of a run: the best policy of each fold, and the full state for ``--resume``.

A *policy* checkpoint (``checkpoints/fold_K``) holds what a backtest needs: the
network, PopArt statistics, the ISV and the fold's feature normaliser, with the
fold's train, validation and test windows. When the fold's epochs are done, the
trainer acts with it once on the test window (:func:`acting_with_saved_policy`),
so the reported test figure is a backtest of exactly that file. A
*resume* checkpoint (``checkpoints/resume``, written on a graceful stop) holds
every piece of training state — learner (with replay and optimiser), ISV,
environments, exploration counters — plus the run's position, so a resumed run
ends with the same results as one that was never interrupted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import structlog
import torch

from foxhunt import __version__
from foxhunt.checkpoint import TENSORS_FILE, load_checkpoint, save_checkpoint
from foxhunt.checkpoint_fields import expect_tensors, naming_the_file, read_resume_record
from foxhunt.config_loading import unstructure
from foxhunt.errors import CheckpointError
from foxhunt.trainer.evaluation import POLICIES

if TYPE_CHECKING:
    from foxhunt.folds import Fold
    from foxhunt.trainer.trainer import Trainer

__all__ = ["Position", "save", "restore", "save_policy", "acting_with_saved_policy", "RESUME_NAME", "fold_checkpoint_name"]

log = structlog.get_logger(__name__)

RESUME_NAME = "resume"


def fold_checkpoint_name(fold: int) -> str:
    return f"fold_{fold}"


@attrs.define
class Position:
    """Where a run stands: the next fold and epoch to train, the fold's best so far, finished folds."""

    fold: int = 0
    epoch: int = 0
    best: dict[str, Any] | None = None
    results: list[dict[str, Any]] = attrs.Factory(list)


def _common_metadata(trainer: Trainer) -> dict[str, Any]:
    features = trainer.data.features
    return {
        "foxhunt_version": __version__,
        "config": unstructure(trainer.config),
        "plugins": trainer.host.versions(),
        "seed": trainer.config.run.seed,
        "data_source": trainer.config.data.source,
        "data_hash": trainer.data.market.content_hash(),
        "feature_set": {
            "name": features.feature_set.name,
            "version": features.feature_set.version,
            "names": list(features.names),
            "warmup": features.warmup,
        },
    }


def save_policy(trainer: Trainer, fold: Fold, epoch: int, validation: dict[str, float]) -> Path:
    """The fold's best policy so far (overwritten when a later epoch validates better)."""
    tensors = {f"learner.{name}": tensor for name, tensor in trainer.learner.policy_state_dict().items()}
    tensors["isv"] = trainer.isv.tensor
    tensors["normalizer.mean"] = torch.from_numpy(np.array(trainer.normalizer.mean, dtype=np.float64))
    tensors["normalizer.std"] = torch.from_numpy(np.array(trainer.normalizer.std, dtype=np.float64))
    metadata = _common_metadata(trainer) | {
        "kind": "policy",
        "fold": fold.index,
        "epoch": epoch,
        "train_window": [fold.train.start, fold.train.stop],
        "validation_window": [fold.validation.start, fold.validation.stop],
        "test_window": [fold.test.start, fold.test.stop],
        "validation": validation,
        "normalizer_clip": trainer.normalizer.clip,
    }
    return save_checkpoint(trainer.run_dir.checkpoint_dir(fold_checkpoint_name(fold.index)), tensors, metadata, trainer.layout)


@contextmanager
def acting_with_saved_policy(trainer: Trainer, fold: Fold) -> Iterator[dict[str, Any]]:
    """Inside the block the trainer's learner acts with ``fold``'s saved policy checkpoint; yields its metadata.

    The checkpoint's policy tensors and ISV (the atom support is read from it) are
    copied into the live learner, and the live values are copied back on exit, so
    training continues exactly as if the block had not run (the resume tests
    compare bytes).
    """
    directory = trainer.run_dir.checkpoint_dir(fold_checkpoint_name(fold.index))
    tensors, metadata = load_checkpoint(directory, trainer.layout)
    expect_tensors(tensors, {"isv": trainer.isv.tensor}, directory / TENSORS_FILE)
    live_policy = trainer.learner.policy_state_dict()  # copies
    live_isv = trainer.isv.tensor.clone()
    try:
        with naming_the_file(directory / TENSORS_FILE):
            trainer.learner.load_policy_state_dict(
                {name.removeprefix("learner."): t for name, t in tensors.items() if name.startswith("learner.")}
            )
        with torch.no_grad():
            trainer.isv.tensor.copy_(tensors["isv"].to(trainer.isv.tensor.device))
        yield metadata
    finally:
        trainer.learner.load_policy_state_dict(live_policy)
        with torch.no_grad():
            trainer.isv.tensor.copy_(live_isv)


def _runtime_tensors(trainer: Trainer) -> dict[str, torch.Tensor]:
    """Live tensors outside the learner that a resume must restore in place."""
    return {
        "isv": trainer.isv.tensor,
        "env.state": trainer.env.state,
        "env.rng": trainer.env.rng,
        "env.obs": trainer.env.obs,
        "env.params": trainer.env.params,
        "explorer.counter": trainer.explorer.counter,
        "step_counter": trainer.step_counter,
    }


def save(trainer: Trainer, position: Position) -> Path:
    """Write the resume checkpoint at an epoch boundary."""
    tensors = {f"learner.{name}": tensor for name, tensor in trainer.learner.state_dict().items()}
    tensors.update(_runtime_tensors(trainer))
    metadata = _common_metadata(trainer) | {
        "kind": "resume",
        "position": attrs.asdict(position),
        "metric_lines": trainer.run_dir.metric_lines(),
        "monitors": {m.name: {"observations": m.observations, "fires": m.fires} for m in trainer.monitors},
    }
    path = save_checkpoint(trainer.run_dir.checkpoint_dir(RESUME_NAME), tensors, metadata, trainer.layout)
    log.warning("stopped at a safe point", checkpoint=str(path), fold=position.fold, next_epoch=position.epoch)
    return path


def resume_checkpoint_dir(run_path: Path) -> Path:
    """The resume checkpoint of ``run_path``, or a clear error saying why there is none (checked before any build)."""
    directory = Path(run_path) / "checkpoints" / RESUME_NAME
    if not directory.exists():
        why = ("the run finished (it has summary.json): nothing to resume; start a new run instead"
               if (Path(run_path) / "summary.json").exists() else "the run never stopped gracefully")
        raise CheckpointError(f"{run_path}: no resume checkpoint (checkpoints/{RESUME_NAME}); {why}")
    return directory


def restore(trainer: Trainer, run_path: Path) -> Position:
    """Load the resume checkpoint of ``run_path`` into a freshly built trainer; returns where to continue."""
    directory = resume_checkpoint_dir(run_path)
    tensors, metadata = load_checkpoint(directory, trainer.layout)
    record = read_resume_record(metadata, directory, len(trainer.data.folds), trainer.config.train.epochs, POLICIES)
    if record.data_hash != trainer.data.market.content_hash():
        raise CheckpointError(f"{directory}: the data changed since this run stopped (hash differs); resume needs the same data")
    tensor_path = directory / TENSORS_FILE
    expect_tensors(tensors, _runtime_tensors(trainer), tensor_path)  # all checked before the first in-place copy
    learner_state = {name.removeprefix("learner."): t for name, t in tensors.items() if name.startswith("learner.")}
    with naming_the_file(tensor_path):
        trainer.learner.load_state_dict(learner_state)
    with torch.no_grad():
        for name, live in _runtime_tensors(trainer).items():
            live.copy_(tensors[name].to(live.device))
    for monitor in trainer.monitors:
        if monitor.name in record.monitors:
            monitor.observations, monitor.fires = record.monitors[monitor.name]
    position = Position(record.fold, record.epoch, record.best, record.results)
    trainer.run_dir.truncate_metrics(record.metric_lines)
    if position.epoch > 0:
        trainer.enter_fold(trainer.data.folds[position.fold])
        trainer.obs = trainer.env.obs
    log.info("resumed", fold=position.fold, next_epoch=position.epoch)
    return position
