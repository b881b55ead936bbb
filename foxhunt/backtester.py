"""``foxhunt backtest``: evaluate a saved policy checkpoint on any data.

The checkpoint's layout is verified before anything else (a differing ISV
fingerprint or plugin set is refused with the diff). Features are recomputed
with the checkpoint's feature set and normalised with its training window's
statistics, so the policy sees exactly what it saw in validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np

from foxhunt.checkpoint import load_checkpoint, read_metadata, verify_layout
from foxhunt.config import FoxhuntConfig
from foxhunt.config_loading import structure
from foxhunt.data import MarketData, load_from_config
from foxhunt.env.backtest import backtest, baselines
from foxhunt.env.tables import PortfolioObs
from foxhunt.errors import CheckpointError
from foxhunt.features import FeatureSet, Normalizer, compute_features
from foxhunt.isv import ISV
from foxhunt.learner import Learner
from foxhunt.plugins import PluginHost
from foxhunt.trainer import evaluation

__all__ = ["BacktestOutcome", "backtest_checkpoint", "plugin_set_diff"]


@attrs.frozen
class BacktestOutcome:
    """Metrics per policy (agent, buy_and_hold, flat), their equity curves and the window evaluated."""

    metrics: dict[str, dict[str, float]]
    curves: dict[str, list[float]]
    window: tuple[int, int]
    timestamps: list[str]
    source: str


def plugin_set_diff(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Lines naming plugins added, removed or changed in version between a checkpoint and now."""
    lines = []
    for name in sorted(set(saved) | set(current)):
        before, after = saved.get(name), current.get(name)
        if before is None:
            lines.append(f"+ {name} {after['version']} (not in the checkpoint)")
        elif after is None:
            lines.append(f"- {name} {before['version']} (missing now)")
        elif before["version"] != after["version"]:
            lines.append(f"~ {name} {before['version']} -> {after['version']}")
    return lines


def _load_config(metadata: dict[str, Any], source: str) -> FoxhuntConfig:
    if "config" not in metadata:
        raise CheckpointError(f"{source}: checkpoint metadata has no config; it is not a foxhunt policy checkpoint")
    return structure(metadata["config"], FoxhuntConfig, source=f"{source} (saved config)")


def backtest_checkpoint(path: Path, data_source: str | None = None, device: str = "cpu") -> BacktestOutcome:
    """Backtest the policy in checkpoint ``path`` on its own validation window, or on ``data_source``."""
    path = Path(path)
    metadata = read_metadata(path)
    if metadata.get("kind") != "policy":
        raise CheckpointError(f"{path}: this is a {metadata.get('kind', 'unknown')!r} checkpoint; backtest takes a fold checkpoint (checkpoints/fold_K)")
    config = _load_config(metadata, str(path))
    host = PluginHost(config.plugins).discover().declare()
    registries = host.freeze()
    verify_layout(metadata, registries.layout, str(path))  # first: no data is touched for a foreign layout
    changed = plugin_set_diff(metadata.get("plugins", {}), host.versions())
    if changed:
        raise CheckpointError(
            f"{path}: the plugin set differs from the one that trained this checkpoint:\n  "
            + "\n  ".join(changed)
            + "\nInstall the same plugin versions (see plugins in its metadata.json) to evaluate it."
        )
    tensors, _ = load_checkpoint(path, registries.layout)
    if data_source is not None:
        config = attrs.evolve(config, data=attrs.evolve(config.data, source=data_source))
    market: MarketData = load_from_config(config.data)
    saved_set = metadata["feature_set"]
    feature_set = FeatureSet(saved_set["name"], saved_set["version"], tuple(saved_set["names"]))
    features = compute_features(market, feature_set, config.features.make_cache())
    normalizer = Normalizer(
        mean=tensors["normalizer.mean"].numpy(), std=tensors["normalizer.std"].numpy(), clip=metadata.get("normalizer_clip")
    )
    values = np.array(normalizer.apply(features.values), dtype=np.float32)
    values[: features.warmup] = 0.0
    same_data = market.content_hash() == metadata.get("data_hash")
    window = tuple(metadata["validation_window"]) if same_data else (features.warmup, len(market))
    isv = ISV(registries.layout, device)
    isv.tensor.copy_(tensors["isv"])
    host.start()
    small_replay = attrs.evolve(config.learner, replay=attrs.evolve(config.learner.replay, capacity=config.env.n_envs))
    learner = Learner(
        attrs.evolve(config, learner=small_replay), registries.layout, isv, host.loss_components(config),
        values.shape[1] + PortfolioObs.size(), device, config.run.seed, n_envs=1,
    )
    learner.load_policy_state_dict(
        {name.removeprefix("learner."): t for name, t in tensors.items() if name.startswith("learner.")}
    )
    agent = backtest(evaluation.greedy_policy(learner.act_values, device), market.ohlcv, values, market.instrument, config.env, window=window)
    results = {"agent": agent, **baselines(market.ohlcv, values, market.instrument, config.env, window=window)}
    stamps = market.timestamps[window[0] : window[1]].astype(str).tolist()
    host.close()
    return BacktestOutcome(
        metrics={name: evaluation.metrics_of(result) for name, result in results.items()},
        curves={name: result.equity.tolist() for name, result in results.items()},
        window=(int(window[0]), int(window[1])),
        timestamps=stamps,
        source=config.data.source,
    )

