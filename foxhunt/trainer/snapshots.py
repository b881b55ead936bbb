"""``[train] policy_epochs``: a fold's policy that averages the action values of its best epochs.

One epoch's network is one draw from a noisy training path: two runs that differ only in how a CPU rounds
a sum end a fold with different networks, and the epoch picked on a 500-bar validation window is one of
them. With ``policy_epochs = K`` > 1 the fold's policy (``checkpoints/fold_K``) is the fold's K epochs of
best validation score together, acting on the mean of their expected action values
(:meth:`Policy.averaging <foxhunt.policy.Policy.averaging>`); that policy is backtested on the validation
window for the fold's reported validation figure, and once on the test window for its test figure.

State, so that a resumed run ends as one never stopped:

- the ranking lives in the resume position (``Position.snapshots``: epoch, score and validation metrics of
  the K best so far, best first);
- each ranked epoch's network lives in its own policy checkpoint, ``checkpoints/fold_K.epoch_E``, written
  when the epoch enters the ranking: before the resume checkpoint that lists it, and before a plateau
  recovery rewinds the learner, so every epoch a resume checkpoint lists has its file;
- after each resume checkpoint, ``fold_K`` is made again from the listed epochs' files, and the files of
  epochs no longer listed are removed. At the fold's end the epoch files go; ``fold_K`` holds every member.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from foxhunt.errors import CheckpointError
from foxhunt.policy import Policy
from foxhunt.trainer import evaluation, resume

if TYPE_CHECKING:
    from foxhunt.folds import Fold
    from foxhunt.trainer.trainer import Trainer

__all__ = ["epoch_checkpoint_name", "offer", "write_fold_policy", "finish_fold"]


def epoch_checkpoint_name(fold: int, epoch: int) -> str:
    return f"{resume.fold_checkpoint_name(fold)}.epoch_{epoch}"


def offer(trainer: Trainer, fold: Fold, position: resume.Position, epoch: int, score: float,
          validation: dict[str, float]) -> bool:
    """Rank epoch ``epoch`` (validation ``score``) among the fold's best; if it is among the
    ``policy_epochs`` best, save the learner as its epoch file and list it. Whether the ranking changed."""
    train = trainer.config.train
    # ties keep the earlier epoch first, as the single best epoch's rule does (a later one must beat it)
    place = next((index for index, ranked in enumerate(position.snapshots)
                  if evaluation.better(train.validation_metric, score, ranked["score"])), len(position.snapshots))
    if place >= train.policy_epochs:
        return False
    resume.save_policy(trainer, fold, epoch, validation, epoch_checkpoint_name(fold.index, epoch))
    position.snapshots.insert(place, {"epoch": epoch, "score": score, "agent": validation})
    del position.snapshots[train.policy_epochs:]
    return True


def write_fold_policy(trainer: Trainer, fold: Fold, position: resume.Position) -> None:
    """``fold_K`` from the listed epochs' files (best first); then the files of unlisted epochs are removed."""
    ranked = []
    for snapshot in position.snapshots:
        directory = trainer.run_dir.checkpoint_dir(epoch_checkpoint_name(fold.index, snapshot["epoch"]))
        if not directory.exists():
            raise CheckpointError(f"{directory}: missing; the resume position lists epoch {snapshot['epoch']} among "
                                  f"fold {fold.index}'s best, and its policy is kept there. Start the run again")
        ranked.append(_load(trainer, directory))
    Policy.averaging(ranked).save(trainer.run_dir.checkpoint_dir(resume.fold_checkpoint_name(fold.index)))
    _remove_epoch_files(trainer, fold, keep={snapshot["epoch"] for snapshot in position.snapshots})


def finish_fold(trainer: Trainer, fold: Fold) -> None:
    """The fold is tested: its epoch files go (``fold_K`` holds every member)."""
    _remove_epoch_files(trainer, fold, keep=set())


def _load(trainer: Trainer, directory: Any) -> Policy:
    return Policy.load(directory, trainer.layout, trainer.device, trainer.host.encoders(trainer.config))


def _remove_epoch_files(trainer: Trainer, fold: Fold, keep: set[int]) -> None:
    prefix = epoch_checkpoint_name(fold.index, 0).removesuffix("0")
    checkpoints = trainer.run_dir.checkpoint_dir(prefix).parent
    for directory in checkpoints.glob(f"{prefix}*") if checkpoints.exists() else ():
        epoch = directory.name.removeprefix(prefix)
        if epoch.isdigit() and int(epoch) not in keep:
            shutil.rmtree(directory, ignore_errors=True)
