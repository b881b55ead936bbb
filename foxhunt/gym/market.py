"""The market a Gymnasium env trades: data, normalised features and window, built by the trainer's own path.

A run's config says where the bars come from (``[data]``), which features are
computed (``[features]``) and how the walk-forward folds lie (``[folds]``).
:func:`prepare_market` loads the bars (or takes a :class:`MarketData`), computes
the cached causal features and the folds with
:func:`foxhunt.trainer.run_data.prepare_data`, normalises the features on the
chosen fold's training bars with :func:`foxhunt.trainer.run_data.normalised_features`
(warm-up rows zeroed), and picks the window episodes run in. The environment
then sees exactly the observations ``foxhunt train`` gives its agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np

from foxhunt.config import FoxhuntConfig, load_config
from foxhunt.data.market import MarketData
from foxhunt.features.normalize import Normalizer
from foxhunt.folds import Fold
from foxhunt.trainer.run_data import normalised_features, prepare_data

__all__ = ["WINDOWS", "GymMarket", "resolve_config", "prepare_market"]

# Which of the fold's windows episodes run in: "train" is where the trainer collects experience;
# "validation" and "test" are the held-out windows its policies are selected and reported on.
WINDOWS = ("train", "validation", "test")


@attrs.frozen(eq=False)
class GymMarket:
    """Everything an environment needs: bars, normalised features ``[bars, F]`` (float32) and the window."""

    config: FoxhuntConfig
    market: MarketData
    features: np.ndarray = attrs.field(repr=False)
    feature_names: tuple[str, ...]
    normalizer: Normalizer = attrs.field(repr=False)
    fold: Fold
    window: tuple[int, int]


def resolve_config(
    config: FoxhuntConfig | str | Path | None = None,
    data: str | MarketData | None = None,
    overrides: Sequence[str] = (),
) -> FoxhuntConfig:
    """The run config: ``config`` as given, or loaded from a TOML path (or the defaults) with ``--set``-style
    ``overrides``; a source string in ``data`` replaces ``[data] source`` (like the CLI's ``--data``)."""
    if isinstance(overrides, str):
        raise TypeError(f"overrides must be a sequence of 'section.key=value' strings, got the string {overrides!r}")
    if isinstance(config, FoxhuntConfig):
        if overrides:
            raise ValueError("overrides apply to a config file or the defaults; evolve a FoxhuntConfig with attrs.evolve")
        resolved = config
    else:
        resolved = load_config(None if config is None else Path(config), overrides)
    if isinstance(data, str):
        resolved = attrs.evolve(resolved, data=attrs.evolve(resolved.data, source=data))
    return resolved


def prepare_market(config: FoxhuntConfig, data: MarketData | None = None, *, fold: int = 0,
                   window: str = "train") -> GymMarket:
    """Bars (``data``, else loaded from ``config.data``), features normalised on fold ``fold``'s training bars,
    and the bar range ``[start, end)`` of that fold's ``window`` (one of :data:`WINDOWS`)."""
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
    prepared = prepare_data(config, data)
    if not 0 <= fold < len(prepared.folds):
        raise ValueError(f"fold must be in 0..{len(prepared.folds) - 1} (folds.n_folds = {len(prepared.folds)}), got {fold}")
    chosen = prepared.folds[fold]
    features, normalizer = normalised_features(prepared.features, chosen, config.features.clip)
    bars = {"train": chosen.train, "validation": chosen.validation, "test": chosen.test}[window]
    return GymMarket(
        config=config,
        market=prepared.market,
        features=features,
        feature_names=tuple(prepared.features.names),
        normalizer=normalizer,
        fold=chosen,
        window=(bars.start, bars.stop),
    )
