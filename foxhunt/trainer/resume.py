"""Checkpoints of a run: the best policy of each fold, and the full state for ``--resume``.

A *policy* checkpoint (``checkpoints/fold_K``) is a saved :class:`~foxhunt.policy.Policy`:
what a backtest needs (network, PopArt statistics, the ISV and the fold's
feature normaliser), with the fold's train, validation and test windows. When
the fold's epochs are done, the trainer loads it (:func:`saved_policy`) and acts
with it once on the test window, so the reported test figure is a backtest of
exactly that file. A *resume* checkpoint (``checkpoints/resume``) holds every
piece of training state plus the run's position, so a resumed run ends with the
same results as one that was never interrupted. Each object keeps its own
state (``state_dict`` / ``load_state_dict``): the learner (networks, replay,
optimiser), the vector environment, the explorer and the trainer (ISV, step
counter); this module composes them, each under the prefix its tensors have
always had in the file (``learner.``, ``env.``, ``explorer.``, none for the
trainer's), and adds the position, metric line count and monitor counters.

The resume checkpoint is rewritten at every epoch boundary, so a run killed at
any moment loses at most the epoch it was in. Order matters at a boundary: the
epoch's metric line is appended and flushed, then the resume checkpoint is
published (it counts that line), then the fold's best policy is written if this
epoch is the best. The policy is never ahead of the resume checkpoint:
:func:`restore` rewrites it from the restored state when the kill came between
the two. A finished run removes its resume checkpoint after ``summary.json``
is on disk, so at every moment a run has one or the other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import torch

from foxhunt import __version__
from foxhunt.checkpoint import TENSORS_FILE, load_checkpoint, read_metadata, save_checkpoint, verify_metadata
from foxhunt.checkpoint_fields import expect_tensors, naming_the_file, read_resume_record
from foxhunt.config import FoxhuntConfig, load_config
from foxhunt.config_loading import unstructure
from foxhunt.errors import CheckpointError, FoxhuntError
from foxhunt.plugin.settings import migrate_saved
from foxhunt.policy import Policy
from foxhunt.trainer.evaluation import POLICIES

if TYPE_CHECKING:
    from foxhunt.folds import Fold
    from foxhunt.trainer.trainer import Trainer

__all__ = [
    "Position", "save", "restore", "discard", "save_policy", "saved_policy", "RESUME_NAME",
    "fold_checkpoint_name", "find_resume_checkpoint", "resume_config", "config_differences",
]

log = structlog.get_logger(__name__)

RESUME_NAME = "resume"


def fold_checkpoint_name(fold: int) -> str:
    return f"fold_{fold}"


@attrs.define
class Position:
    """Where a run stands: the next fold and epoch to train, the fold's best so far, finished folds, (with
    ``[train] policy_epochs`` > 1) the fold's best epochs so far, best first (:mod:`foxhunt.trainer.snapshots`),
    and the flat-fold retries the fold has started (``[train] flat_fold_retries``: it trains ``epochs × (1 +
    retries)`` epochs)."""

    fold: int = 0
    epoch: int = 0
    best: dict[str, Any] | None = None
    results: list[dict[str, Any]] = attrs.Factory(list)
    snapshots: list[dict[str, Any]] = attrs.Factory(list)
    retries: int = 0


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


def save_policy(trainer: Trainer, fold: Fold, epoch: int, validation: dict[str, float], name: str | None = None) -> Path:
    """The learner's policy as epoch ``epoch`` of ``fold``: the fold's best so far (``checkpoints/fold_K``,
    overwritten when a later epoch validates better), or under the checkpoint ``name`` given."""
    metadata = _common_metadata(trainer) | {
        "fold": fold.index,
        "epoch": epoch,
        "train_window": [fold.train.start, fold.train.stop],
        "validation_window": [fold.validation.start, fold.validation.stop],
        "test_window": [fold.test.start, fold.test.stop],
        "validation": validation,
    }
    policy = Policy.of_learner(trainer.learner, trainer.normalizer, metadata)
    return policy.save(trainer.run_dir.checkpoint_dir(name or fold_checkpoint_name(fold.index)))


def saved_policy(trainer: Trainer, fold: Fold) -> Policy:
    """``fold``'s saved policy checkpoint, loaded onto the trainer's device beside its live learner (which it
    leaves alone: training continues as if it had not been loaded). It acts through the run's encoder, on the
    fold's feature matrix (the one the learner's windows gather from)."""
    policy = Policy.load(trainer.run_dir.checkpoint_dir(fold_checkpoint_name(fold.index)), trainer.layout,
                         trainer.device, trainer.host.encoders(trainer.config))
    policy.use_features(trainer.env.features)
    return policy


# Each object outside the learner that holds resumable state, by the prefix of its tensors' names in the file.
# The names are the file format: a checkpoint written before these objects had their own state_dict still loads.
_LEARNER_PREFIX = "learner."


def _resumable_parts(trainer: Trainer) -> dict[str, Any]:
    return {"env.": trainer.env, "explorer.": trainer.explorer, "": trainer}


def _with_prefix(prefix: str, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{prefix}{name}": tensor for name, tensor in state.items()}


def save(trainer: Trainer, position: Position) -> Path:
    """Write the resume checkpoint at an epoch boundary (after flushing the metric lines it counts)."""
    trainer.run_dir.sync_metrics()
    tensors = _with_prefix(_LEARNER_PREFIX, trainer.learner.state_dict())
    for prefix, part in _resumable_parts(trainer).items():
        tensors.update(_with_prefix(prefix, part.state_dict()))
    metadata = _common_metadata(trainer) | {
        "kind": "resume",
        "position": attrs.asdict(position),
        "metric_lines": trainer.run_dir.metric_lines(),
        "monitors": {m.name: {"observations": m.observations, "fires": m.fires} for m in trainer.monitors},
        # [train.recovery]: its counters (the ring of checkpoints is not kept: foxhunt/trainer/recovery.py)
        "recovery": trainer.recovery.state() if trainer.recovery is not None else None,
    }
    return save_checkpoint(trainer.run_dir.checkpoint_dir(RESUME_NAME), tensors, metadata, trainer.layout)


def _load_state(trainer: Trainer, tensors: dict[str, torch.Tensor], tensor_path: Path) -> None:
    """Every part's tensors into the live objects; every part is checked before the first in-place copy."""
    parts = _resumable_parts(trainer)
    live = {prefix: part.state_dict() for prefix, part in parts.items()}
    expect_tensors(tensors, {name: t for prefix, state in live.items() for name, t in _with_prefix(prefix, state).items()},
                   tensor_path)
    learner_state = {name.removeprefix(_LEARNER_PREFIX): t for name, t in tensors.items() if name.startswith(_LEARNER_PREFIX)}
    with naming_the_file(tensor_path):
        trainer.learner.load_state_dict(learner_state)  # checks all of its own before its first copy
        for prefix, part in parts.items():
            part.load_state_dict({name: tensors[prefix + name] for name in live[prefix]})


def discard(trainer: Trainer) -> None:
    """Remove the resume checkpoint of a finished run (called after summary.json is on disk): it is large, and
    a finished run is never resumed."""
    shutil.rmtree(trainer.run_dir.checkpoint_dir(RESUME_NAME), ignore_errors=True)


def find_resume_checkpoint(run_path: Path) -> Path | None:
    """The resume checkpoint of ``run_path``; None when no epoch boundary was reached (the run starts over)."""
    directory = Path(run_path) / "checkpoints" / RESUME_NAME
    return directory if directory.exists() else None


def config_differences(saved: Any, current: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(key path, saved value, current value)`` for every leaf that differs between two unstructured configs."""
    if isinstance(saved, dict) and isinstance(current, dict):
        return [difference for key in sorted(set(saved) | set(current), key=str)
                for difference in config_differences(saved.get(key), current.get(key), f"{prefix}{key}.")]
    # compared as JSON, so that a NaN equals itself and a tuple its list
    if json.dumps(saved, sort_keys=True) != json.dumps(current, sort_keys=True):
        return [(prefix.removesuffix("."), saved, current)]
    return []


# Where a run trains may change between stop and resume (`--resume RUN --device cpu` on another machine, or on
# another number of devices: `--devices M`, docs/multi-device.md), and whether its metrics also go to TensorBoard
# (set in config.toml; absent from runs saved before the key existed).
_MAY_CHANGE = ("run.device", "run.devices", "run.tensorboard")


def _refuse_changed_config(saved: dict[str, Any], config: FoxhuntConfig, directory: Path) -> None:
    current = json.loads(json.dumps(unstructure(config)))
    saved = migrate_saved(saved)  # a run saved before a key was renamed (`[plugins] enable` is `only`)
    differences = [d for d in config_differences(saved, current) if d[0] not in _MAY_CHANGE]
    if differences:
        def shown(value: Any) -> str:
            text = "(absent)" if value is None else json.dumps(value)
            return text if len(text) <= 60 else text[:57] + "..."

        keys = "; ".join(f"{key}: {shown(old)} when trained, {shown(new)} now" for key, old, new in differences)
        raise CheckpointError(
            f"{directory}: the config to resume with differs from the one this run was trained with (kept in the "
            f"checkpoint) at {keys}. A resumed run continues with its own config: put the values back in "
            "config.toml, or start a new run with the new values"
        )


def resume_config(run_path: Path, device: str | None = None) -> FoxhuntConfig:
    """The config ``foxhunt train --resume RUN`` runs: RUN's config.toml (with ``device``, if given), refused
    when it differs from the one the run was trained with — checked on the resume checkpoint's verified
    metadata, before anything is built."""
    config_path = Path(run_path) / "config.toml"
    if not config_path.is_file():
        raise FoxhuntError(
            f"{run_path}: no config.toml; the run was stopped while it was starting, before any epoch. Run the same "
            "`foxhunt train` command again (the same --out is accepted)"
        )
    config = load_config(config_path)
    if device is not None:
        config = attrs.evolve(config, run=attrs.evolve(config.run, device=device))
    directory = find_resume_checkpoint(run_path)
    if directory is not None:
        metadata = read_metadata(directory)
        verify_metadata(metadata, directory)
        if isinstance(metadata.get("config"), dict):  # otherwise restore() names the fault, after the layout check
            _refuse_changed_config(metadata["config"], config, directory)
    return config


def _restore_recovery(trainer: Trainer, state: Any, directory: Path) -> None:
    """The plateau recovery's counters (``[train.recovery]`` on: the config check made sure it was on when saved)."""
    keys = ("used", "stale_epochs", "best", "previous", "boost_left", "fired_at")
    if not isinstance(state, dict) or any(key not in state for key in keys):
        raise CheckpointError(f"{directory}: the resume checkpoint has no plateau-recovery counters "
                              f"(metadata 'recovery' with {', '.join(keys)}); it is damaged or was written by another "
                              "version of foxhunt. Start the run again")
    trainer.recovery.load_state(state)


def restore(trainer: Trainer, run_path: Path) -> Position:
    """Load the resume checkpoint of ``run_path`` into a freshly built trainer; returns where to continue.

    A run without one had not finished its first epoch: it starts from the beginning (its metric lines, if
    any, were not counted by any checkpoint and are dropped).
    """
    directory = find_resume_checkpoint(run_path)
    if directory is None:
        log.warning("no resume checkpoint: the run stopped before its first epoch ended; training from the start")
        trainer.run_dir.truncate_metrics(0)
        return Position()
    tensors, metadata = load_checkpoint(directory, trainer.layout)
    record = read_resume_record(metadata, directory, len(trainer.data.folds), trainer.config.train.epochs, POLICIES,
                                trainer.config.train.flat_fold_retries)
    _refuse_changed_config(record.config, trainer.config, directory)
    if record.data_hash != trainer.data.market.content_hash():
        raise CheckpointError(f"{directory}: the data changed since this run stopped (hash differs); resume needs the same data")
    _load_state(trainer, tensors, directory / TENSORS_FILE)
    for monitor in trainer.monitors:
        if monitor.name in record.monitors:
            monitor.observations, monitor.fires = record.monitors[monitor.name]
    if trainer.recovery is not None:
        _restore_recovery(trainer, metadata.get("recovery"), directory)
    position = Position(record.fold, record.epoch, record.best, record.results, record.snapshots, record.retries)
    try:
        trainer.run_dir.truncate_metrics(record.metric_lines)
    except FoxhuntError as error:  # the checkpoint counts lines metrics.jsonl no longer holds: refuse the pair
        raise CheckpointError(f"{directory}: {error}") from None
    if position.epoch > 0:
        fold = trainer.data.folds[position.fold]
        trainer.enter_fold(fold)
        trainer.obs = trainer.env.obs
        best = position.best
        recovered = trainer.recovery is not None and trainer.recovery.fired_at == position.epoch - 1
        # [train] policy_epochs > 1: the trainer makes the fold's policy again from its epochs' files (snapshots.py)
        if trainer.config.train.policy_epochs == 1 and best is not None and best["epoch"] == position.epoch - 1 and not recovered:
            # The checkpoint was written just before the fold's best policy, which the kill may have cut off:
            # the restored learner *is* that policy, so it is written again (the same bytes on the CPU). Not after
            # a plateau recovery at that epoch: the learner was rewound, and the policy was written before it.
            save_policy(trainer, fold, best["epoch"], best["agent"])
    log.info("resumed", fold=position.fold, next_epoch=position.epoch, metric_lines=record.metric_lines)
    return position
