"""Typed readers of checkpoint metadata and tensors: one place that says what each consumer needs.

A checkpoint's ``metadata.json`` is untrusted input. Rather than let a missing
key or a value of the wrong type surface as a ``KeyError`` deep inside a
backtest or a resume, each consumer reads its keys here, up front, into frozen
records; anything missing or mistyped is one :class:`CheckpointError` naming the
file and the key. Tensors are checked the same way against the shapes and
dtypes the current build expects, before anything is copied in place.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch

from foxhunt.checkpoint import METADATA_FILE
from foxhunt.errors import CheckpointError, FoxhuntError

__all__ = [
    "FeatureSetRecord",
    "PolicyRecord",
    "ResumeRecord",
    "read_policy_record",
    "read_resume_record",
    "expect_tensors",
    "naming_the_file",
]


class _Reader:
    """Typed access to one checkpoint's metadata; every refusal names the file and the key path."""

    def __init__(self, metadata: Mapping[str, Any], directory: Path) -> None:
        self.metadata = metadata
        self.source = Path(directory) / METADATA_FILE

    def fail(self, key: str, problem: str) -> CheckpointError:
        return CheckpointError(f"{self.source}: metadata key {key!r} {problem}; the checkpoint is damaged or altered")

    def get(self, key: str, kind: type | tuple[type, ...], parent: Mapping[str, Any] | None = None,
            prefix: str = "", optional: bool = False) -> Any:
        mapping = self.metadata if parent is None else parent
        path = f"{prefix}{key}"
        if key not in mapping:
            if optional:
                return None
            raise self.fail(path, "is missing")
        value = mapping[key]
        if value is None and optional:
            return None
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # bool is an int to Python; a JSON true where a count belongs is a type error all the same
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
            names = " or ".join(k.__name__ for k in kinds)
            raise self.fail(path, f"is a {type(value).__name__}, expected {names}")
        return value

    def count(self, key: str, parent: Mapping[str, Any] | None = None, prefix: str = "") -> int:
        value = self.get(key, int, parent, prefix)
        if value < 0:
            raise self.fail(f"{prefix}{key}", f"is negative ({value})")
        return value

    def numbers(self, key: str, parent: Mapping[str, Any], prefix: str) -> list[float]:
        values = self.get(key, list, parent, prefix)
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise self.fail(f"{prefix}{key}", "must be a non-empty list of numbers")
        return values

    def metrics(self, key: str, parent: Mapping[str, Any], prefix: str) -> dict[str, float]:
        values = self.get(key, dict, parent, prefix)
        for name in values:
            self.get(name, (int, float), values, f"{prefix}{key}.")
        return values

    def window(self, key: str, optional: bool = False) -> tuple[int, int] | None:
        value = self.get(key, list, optional=optional)
        if value is None:
            return None
        if len(value) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in value) or not 0 <= value[0] < value[1]:
            raise self.fail(key, f"is {value!r}, expected [start, stop] bar indices with 0 <= start < stop")
        return int(value[0]), int(value[1])

    def plugins(self) -> dict[str, dict[str, Any]]:
        plugins = self.get("plugins", dict)
        for name in plugins:
            self.get("version", str, self.get(name, dict, plugins, "plugins."), f"plugins.{name}.")
        return plugins

    def data_hash(self) -> str | None:
        return self.get("data_hash", str, optional=True)


@attrs.frozen
class FeatureSetRecord:
    name: str
    version: str
    names: tuple[str, ...]
    warmup: int


def _feature_set(reader: _Reader) -> FeatureSetRecord:
    saved = reader.get("feature_set", dict)
    names = reader.get("names", list, saved, "feature_set.")
    if not names or not all(isinstance(n, str) for n in names):
        raise reader.fail("feature_set.names", "must be a non-empty list of feature names")
    return FeatureSetRecord(
        reader.get("name", str, saved, "feature_set."), reader.get("version", str, saved, "feature_set."),
        tuple(names), reader.count("warmup", saved, "feature_set."),
    )


@attrs.frozen
class PolicyRecord:
    """What ``foxhunt backtest`` needs from a fold checkpoint's metadata."""

    config: dict[str, Any]
    plugins: dict[str, dict[str, Any]]
    data_hash: str | None
    feature_set: FeatureSetRecord
    windows: dict[str, tuple[int, int] | None]  # "validation" always; "test" is None in checkpoints made before it
    normalizer_clip: float | None


def read_policy_record(metadata: Mapping[str, Any], directory: Path) -> PolicyRecord:
    reader = _Reader(metadata, directory)
    clip = reader.get("normalizer_clip", (int, float), optional=True)
    if clip is not None and not (math.isfinite(clip) and clip > 0):
        raise reader.fail("normalizer_clip", f"is {clip!r}, expected a positive number or null")
    return PolicyRecord(
        config=reader.get("config", dict),
        plugins=reader.plugins(),
        data_hash=reader.data_hash(),
        feature_set=_feature_set(reader),
        windows={"validation": reader.window("validation_window"), "test": reader.window("test_window", optional=True)},
        normalizer_clip=None if clip is None else float(clip),
    )


@attrs.frozen
class ResumeRecord:
    """What ``foxhunt train --resume`` needs from a resume checkpoint's metadata."""

    data_hash: str | None
    fold: int
    epoch: int
    best: dict[str, Any] | None
    results: list[dict[str, Any]]
    metric_lines: int
    monitors: dict[str, tuple[int, int]]
    config: dict[str, Any]  # the unstructured config the run was trained with
    # [train] policy_epochs > 1: the fold's best epochs so far, best first
    snapshots: list[dict[str, Any]] = attrs.field(factory=list)
    retries: int = 0  # [train] flat_fold_retries: the retries the fold has started


def read_resume_record(metadata: Mapping[str, Any], directory: Path, n_folds: int, epochs: int,
                       policies: tuple[str, ...], flat_fold_retries: int = 0) -> ResumeRecord:
    """The resume position, checked against the run's ``n_folds`` folds of ``epochs`` epochs (and of ``epochs``
    more per flat-fold retry started, at most ``flat_fold_retries``) and its ``policies``."""
    reader = _Reader(metadata, directory)
    position = reader.get("position", dict)
    fold, epoch = reader.count("fold", position, "position."), reader.count("epoch", position, "position.")
    if fold >= n_folds:
        raise reader.fail("position.fold", f"is {fold}, past the run's last fold ({n_folds - 1})")
    retries = reader.count("retries", position, "position.") if "retries" in position else 0
    if retries > flat_fold_retries:
        raise reader.fail("position.retries", f"is {retries}, more than train.flat_fold_retries ({flat_fold_retries})")
    epochs *= 1 + retries
    # epoch == epochs: every epoch of the fold is done (the checkpoint of its last epoch boundary); its test is next
    if epoch > epochs:
        raise reader.fail("position.epoch", f"is {epoch}, past the run's last epoch ({epochs - 1}) and the fold's end ({epochs})")
    best = reader.get("best", dict, position, "position.", optional=True)
    if best is None and epoch == epochs:
        raise reader.fail("position.best", "is missing; a fold whose epochs are done has a best one")
    if best is not None:  # the fold's best epoch so far: compared against, then reported when the fold ends
        reader.get("score", (int, float), best, "position.best.", optional=True)
        if reader.count("epoch", best, "position.best.") >= epoch > 0:
            raise reader.fail("position.best.epoch", f"is {best['epoch']}, not an epoch before the position's ({epoch})")
        reader.metrics("agent", best, "position.best.")
        reader.numbers("equity", best, "position.best.")
    results = reader.get("results", list, position, "position.")
    if len(results) != fold:
        raise reader.fail("position.results", f"holds {len(results)} results, expected one per finished fold ({fold})")
    if any(isinstance(result, dict) and "test" not in result for result in results):
        raise CheckpointError(
            f"{directory}: this run was stopped by a foxhunt that reported folds without a test window; "
            "its finished folds cannot be summarised with the new walk-forward layout. Start a new run"
        )
    for index, result in enumerate(results):  # the finished folds' figures go into summary.json as they are
        prefix = f"position.results.{index}."
        reader.get(str(index), dict, {str(index): result}, "position.results.")
        curves = reader.get("curves", dict, result, prefix)
        for window in ("test", "validation"):
            reader.get(window, dict, result, prefix)
            window_curves = reader.get(window, dict, curves, f"{prefix}curves.")
            for policy in policies:
                reader.metrics(policy, result[window], f"{prefix}{window}.")
                reader.numbers(policy, window_curves, f"{prefix}curves.{window}.")
    monitors = {}
    saved_monitors = reader.get("monitors", dict, optional=True) or {}
    for name in saved_monitors:
        record = reader.get(name, dict, saved_monitors, "monitors.")
        prefix = f"monitors.{name}."
        monitors[name] = (reader.count("observations", record, prefix), reader.count("fires", record, prefix))
    config = reader.get("config", dict)
    snapshots = reader.get("snapshots", list, position, "position.", optional=True) or []
    for index, snapshot in enumerate(snapshots):  # written by a run with [train] policy_epochs > 1
        prefix = f"position.snapshots.{index}."
        reader.get(str(index), dict, {str(index): snapshot}, "position.snapshots.")
        if reader.count("epoch", snapshot, prefix) >= epoch:
            raise reader.fail(f"{prefix}epoch", f"is {snapshot['epoch']}, not an epoch before the position's ({epoch})")
        reader.get("score", (int, float), snapshot, prefix)
        reader.metrics("agent", snapshot, prefix)
    return ResumeRecord(reader.data_hash(), fold, epoch, best, list(results), reader.count("metric_lines"), monitors,
                        config, list(snapshots), retries)


def expect_tensors(tensors: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor], tensor_path: Path) -> None:
    """Refuse unless every name in ``expected`` is in ``tensors`` with the same shape and dtype."""
    for name, like in expected.items():
        if name not in tensors:
            raise CheckpointError(f"{tensor_path}: tensor {name!r} is missing; the checkpoint is damaged or from another version")
        found = tensors[name]
        if found.shape != like.shape or found.dtype != like.dtype:
            raise CheckpointError(
                f"{tensor_path}: tensor {name!r} is {found.dtype} {tuple(found.shape)}, this build expects "
                f"{like.dtype} {tuple(like.shape)}; the checkpoint was made with another network or data shape, or is altered"
            )


@contextmanager
def naming_the_file(path: Path) -> Iterator[None]:
    """Errors raised while applying a checkpoint (e.g. the learner's shape checks) name the checkpoint."""
    try:
        yield
    except FoxhuntError as error:
        if str(error).startswith(str(path)):
            raise
        raise CheckpointError(f"{path}: {error}") from None
