"""The counterfactual mirror as a replay augmentation: every transition also teaches the opposite side.

A share ``fraction`` of each sampled batch (at the default 0.25 every fourth position, evenly spread) is
replaced by its mirror: the observation and the bootstrap observation through the fold's per-column affine
map (``foxhunt.env.mirror.observation_mirror``: each feature's declared parity, the normaliser's mean and
clip, the position's sign), SHORT and LONG swapped in the direction branch. The returns and discounts are
those of the original: in the mirrored market the P&L and costs of a trade and of its mirror are equal
(foxhunt/env/mirror.py says why). The market's future returns an auxiliary task reads
(``Batch.future_returns``) are negated: the mirrored market moves the other way.

With an encoder window (``[learner] encoder`` over W > 1 bars) the replay hands the augmentations the encoder
input ``[W × F + P]``, built before they run: the map's feature part is repeated for each of the window's W
bars and its portfolio part kept once, at the end (``window_columns``; ``AugmentationFold.window`` says W).

On by default (``[plugins.mirror] enabled``, formerly ``[learner.replay] mirror``); ``fraction`` (formerly
``[learner.replay] mirror_fraction``) is at most 0.5: at 0.5 a drift and its mirror are equally likely, so
no drift is learnt at all (docs/learner.md, "The mirror's share", has the runs).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import attrs
import numpy as np
import torch

from foxhunt import AugmentationFold, AugmentationInputs, Branch, ReplayAugmentation, hookimpl
from foxhunt.actions import BRANCH_TABLES, Direction
from foxhunt.env.mirror import observation_mirror

__all__ = ["NAME", "MirrorSettings", "window_columns", "mirror_constants", "mirror_batch", "foxhunt_declare",
           "foxhunt_replay_augmentations"]

NAME = "mirror"


@attrs.frozen
class MirrorSettings:
    """``[plugins.mirror]``: the switch and the share of each batch mirrored."""

    enabled: bool = True
    fraction: float = attrs.field(default=0.25, validator=[attrs.validators.gt(0.0), attrs.validators.le(0.5)])


def window_columns(values: np.ndarray, n_features: int, window: int) -> np.ndarray:
    """A one-bar observation's per-column constants ``[F + P]`` for the encoder input ``[W × F + P]``: the
    feature part repeated for each of the W - 1 earlier bars, then the one-bar constants themselves (the
    portfolio part once, at the end)."""
    return np.concatenate([np.tile(values[:n_features], window - 1), values])


def mirror_constants(fold: AugmentationFold) -> dict[str, Any]:
    """The fold's observation map ``obs' = clamp(obs × scale + shift, low, high)`` per column, and the action
    map: ``codes[c]`` is the mirror of code ``c`` in a column where ``columns`` is true (the direction's).
    With an encoder window (``fold.window`` W > 1) the observation map covers every bar of the window: each
    earlier bar's features are mirrored like the observation's own."""
    mirror = observation_mirror(fold.feature_names, fold.normalizer, fold.feature_parity)
    swapped = {Direction.SHORT: Direction.LONG, Direction.LONG: Direction.SHORT}
    width = max(table.size() for table in BRANCH_TABLES.values())
    n_features = len(fold.feature_names)
    return {
        "scale": window_columns(mirror.scale, n_features, fold.window),
        "shift": window_columns(mirror.shift, n_features, fold.window),
        "low": window_columns(mirror.low, n_features, fold.window),
        "high": window_columns(mirror.high, n_features, fold.window),
        "codes": np.array([swapped.get(code, code) for code in range(width)], dtype=np.int64),
        "columns": np.arange(len(Branch)) == Branch.DIRECTION,
    }


def mirror_batch(inputs: AugmentationInputs) -> Any:
    """The selected positions replaced by their mirror: observations mapped, SHORT and LONG swapped, future
    returns negated."""
    batch, flip, t = inputs.batch, inputs.selected, inputs.tensors

    def mirror(x: torch.Tensor) -> torch.Tensor:
        return torch.where(flip, torch.clamp(x * t["scale"] + t["shift"], t["low"], t["high"]), x)

    actions = torch.where(flip & t["columns"][None, :], t["codes"][batch.actions], batch.actions)
    mirrored = dataclasses.replace(batch, obs=mirror(batch.obs), actions=actions, next_obs=mirror(batch.next_obs))
    if batch.future_returns is None:  # fixed for the run: only an auxiliary task's replay gathers them
        return mirrored
    return dataclasses.replace(mirrored, future_returns=torch.where(flip, -batch.future_returns, batch.future_returns))


@hookimpl
def foxhunt_declare(registrar: Any) -> None:
    registrar.settings(MirrorSettings)


@hookimpl
def foxhunt_replay_augmentations(config: Any, settings: MirrorSettings) -> list[ReplayAugmentation]:
    if not settings.enabled:
        return []
    return [
        ReplayAugmentation(
            name=NAME,
            augment=mirror_batch,
            fraction=settings.fraction,
            prepare=mirror_constants,
            description="the counterfactual mirror: a share of each batch replaced by its mirror (observations "
                        "through the fold's parity map, SHORT and LONG swapped, the same returns)",
        )
    ]
