"""``foxhunt backtest``: evaluate a saved policy checkpoint on any data.

The checkpoint's layout is verified before anything else: a differing plugin
set or ISV layout is refused naming the plugins missing, added or of another
version, the slots that differ, and the ``--set plugins...`` that would load the
plugins it was trained with. The run's own config is the checkpoint's; only its
``[plugins]`` section may be changed (:func:`plugin_overrides`), so that a user
can select those plugins. Features are recomputed
with the checkpoint's feature set and normalised with its training window's
statistics, so the policy sees exactly what it saw in training.

On the checkpoint's own data it is evaluated on the fold's **test** window by
default: the window after validation that played no part in choosing it, and
the one ``summary.json`` reports, so this reproduces the run's test figures.
``window="validation"`` evaluates the window the checkpoint was selected on
(optimistic by construction). Checkpoints saved before folds had test windows
have no ``test_window``: asking them for one is an error that says so and names
the validation option; nothing falls back silently. On other data (``--data``)
every bar after the feature warm-up is evaluated.

Every bar is stepped by the environment kernel of the checkpoint's own plugin
set (:mod:`foxhunt.env.run_kernel`), through the same
:class:`~foxhunt.trainer.evaluation.RunBacktests` the run's validation and test
backtests use, so a plugin's physics gives the figures the run reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from foxhunt.checkpoint import TENSORS_FILE, checkpoint_layout, load_checkpoint, read_metadata, verify_layout
from foxhunt.checkpoint_fields import PolicyRecord, expect_tensors, naming_the_file, read_policy_record
from foxhunt.config import FoxhuntConfig
from foxhunt.config_loading import apply_overrides, deep_copy, load_toml, structure
from foxhunt.data import MarketData, load_from_config
from foxhunt.env.run_kernel import env_step_kernel
from foxhunt.env.tables import PortfolioObs
from foxhunt.errors import CheckpointError, ConfigError, FingerprintMismatch, FoxhuntError
from foxhunt.features import FeatureSet, Normalizer, compute_features
from foxhunt.isv import ISV, layout_diff
from foxhunt.learner import Learner
from foxhunt.plugin_config import migrate_saved
from foxhunt.plugins import PluginHost
from foxhunt.trainer import evaluation

__all__ = ["BacktestOutcome", "LoadedPolicy", "backtest_checkpoint", "load_policy", "plugin_set_diff", "plugin_overrides",
           "CHECKPOINT_WINDOWS", "ALL_BARS"]

CHECKPOINT_WINDOWS = ("test", "validation")  # windows of the checkpoint's own data, by name
ALL_BARS = "all"  # the window name reported when other data is evaluated from the warm-up on


@attrs.frozen
class BacktestOutcome:
    """Metrics per policy (agent, buy_and_hold, flat), their equity curves and the window evaluated.

    ``window_name`` is "test" or "validation" (a window of the checkpoint's own data) or :data:`ALL_BARS`.
    """

    metrics: dict[str, dict[str, float]]
    curves: dict[str, list[float]]
    window: tuple[int, int]
    window_name: str
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


def plugin_overrides(config_path: Path | None = None, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``[plugins]`` table of ``--config FILE`` and ``--set plugins....``, checked like any config's.

    A backtest runs the checkpoint's own config, so the policy sees what it was trained on; only the plugin
    selection and the plugins' tables may be changed (to load the plugins it was trained with). Any other key
    is a :class:`ConfigError` naming it.
    """
    data = load_toml(Path(config_path)) if config_path is not None else {}
    data = apply_overrides(data, overrides) if overrides else data
    others = sorted(key for key in data if key != "plugins")
    if others:
        raise ConfigError(
            f"foxhunt backtest takes only [plugins] from --config and --set (the rest of its config is the "
            f"checkpoint's own, so the policy sees what it was trained on); remove {', '.join(others)}"
        )
    source = " + ".join(filter(None, [str(config_path) if config_path else "", " ".join(f"--set {o}" for o in overrides)]))
    structure(data, FoxhuntConfig, source=source or "config")  # a bad [plugins] names its key, like any config
    return dict(data.get("plugins", {}))


def _with_plugins(saved: Any, plugins: dict[str, Any]) -> Any:
    """The saved config with the user's ``[plugins]`` keys over its own (a plugin's table merged key by key)."""
    if not plugins or not isinstance(saved, dict) or not isinstance(saved.get("plugins", {}), dict):
        return saved
    result = deep_copy(saved)
    table = result.setdefault("plugins", {})
    for key, value in plugins.items():
        table[key] = {**table[key], **value} if isinstance(value, dict) and isinstance(table.get(key), dict) else value
    return result


def _load_config(record: PolicyRecord, source: str, plugins: dict[str, Any]) -> FoxhuntConfig:
    try:
        # a checkpoint saved before plugins owned their settings keeps them where the core had them
        return structure(_with_plugins(migrate_saved(record.config), plugins), FoxhuntConfig, source=f"{source} (saved config)")
    except ConfigError as error:  # the saved config is part of the checkpoint: a bad one is a bad checkpoint
        raise CheckpointError(f"{source}: the saved config is not valid ({error}); the checkpoint is damaged or altered") from None


def _refuse_other_plugins(path: Path, metadata: dict[str, Any], record: PolicyRecord, host: PluginHost,
                          registries: Any) -> None:
    """Refuse a checkpoint trained with other plugins or another layout, naming what differs and what to set."""
    current = host.versions()
    changed = plugin_set_diff(record.plugins, current)
    try:
        verify_layout(metadata, registries.layout, str(path))
    except FingerprintMismatch:
        if not changed:
            raise  # the same plugins, another layout: the checkpoint was altered, and the error says so
    if not changed:
        return
    saved_layout, _ = checkpoint_layout(metadata, str(path))
    slots = layout_diff(saved_layout, registries.layout)
    extra = sorted(set(current) - set(record.plugins))
    missing = sorted(set(record.plugins) - set(current))
    advice = []
    unloaded = {name for name in missing if name in host.plugins and host.plugins[name].status == "disabled"}
    disable = [name for name in dict.fromkeys([*host.selection.disable, *extra]) if name not in unloaded]
    if list(host.selection.disable) != disable:  # the list replaces the saved one: it is given whole
        names = ", ".join(f'"{name}"' for name in disable)
        advice.append(f"pass --set 'plugins.disable=[{names}]' to load only the plugins it was trained with")
    for name in missing:
        saved = record.plugins[name]
        if name not in unloaded:
            advice.append(f"install {saved.get('distribution', name)} {saved['version']} to load plugin {name!r}")
        elif name not in host.selection.disable:
            advice.append(f"add {name!r} to plugins.only")
    for name in sorted(set(record.plugins) & set(current)):
        if record.plugins[name]["version"] != current[name]["version"]:
            advice.append(f"install {record.plugins[name].get('distribution', name)} {record.plugins[name]['version']} "
                          f"for plugin {name!r}")
    raise CheckpointError(
        f"{path}: this checkpoint was trained with another plugin set:\n  " + "\n  ".join(changed)
        + ("" if slots == "(slots identical)" else "\nISV slots that differ (checkpoint -> current):\n  "
           + slots.replace("\n", "\n  "))
        + "\nTo backtest it, " + "; ".join(advice) + " (its metadata.json lists the plugins it was trained with)."
    )


def _saved_window(record: PolicyRecord, window: str, source: str, bars: int) -> tuple[int, int]:
    """The checkpoint's ``window`` ("test" or "validation") as bar indices into its own data of ``bars`` bars."""
    saved = record.windows[window]
    if saved is None:
        raise CheckpointError(
            f"{source}: this checkpoint has no {window} window; it was saved before folds had a test window after "
            "validation, so the only window it knows is the one it was selected on. Pass --window validation to "
            "evaluate it there (an optimistic figure), or --data to evaluate it on other data"
        )
    if saved[1] > bars:
        raise CheckpointError(f"{source}: its {window} window {list(saved)} ends past the data's {bars} bars; the checkpoint is damaged or altered")
    return saved


@attrs.frozen
class LoadedPolicy:
    """A fold checkpoint's greedy policy, verified and ready to act: what a backtest or an export starts from.

    ``learner.act_values`` is the acting path (expected Q per branch action, unnormalised); ``normalizer`` maps
    the raw features named by ``feature_set`` to the market part of an observation. ``host`` is started: close
    it when done.
    """

    learner: Learner
    normalizer: Normalizer
    feature_set: FeatureSet
    record: PolicyRecord
    config: FoxhuntConfig
    host: PluginHost


def load_policy(path: Path, device: str = "cpu", plugins: dict[str, Any] | None = None) -> LoadedPolicy:
    """Verify fold checkpoint ``path`` (kind, layout, plugin set, integrity, tensor shapes) and load its policy.

    ``plugins`` (from :func:`plugin_overrides`) changes the saved config's ``[plugins]`` section.
    """
    path = Path(path)
    metadata = read_metadata(path)
    if metadata.get("kind") != "policy":
        raise CheckpointError(f"{path}: this is a {metadata.get('kind', 'unknown')!r} checkpoint; backtest and export take a fold checkpoint (checkpoints/fold_K)")
    record = read_policy_record(metadata, path)  # every key a policy needs, typed, before anything is built
    config = _load_config(record, str(path), plugins or {})
    host = PluginHost(config.plugins).discover().declare()
    registries = host.freeze()
    _refuse_other_plugins(path, metadata, record, host, registries)  # first: no data is touched for a foreign layout
    tensors, _ = load_checkpoint(path, registries.layout)
    saved_set = record.feature_set
    try:
        feature_set = FeatureSet(saved_set.name, saved_set.version, saved_set.names)
    except FoxhuntError as error:
        raise CheckpointError(f"{path}: its feature set cannot be rebuilt ({error}); the checkpoint is damaged or altered") from None
    n_features = len(saved_set.names)
    expect_tensors(tensors, {
        "isv": ISV(registries.layout, "cpu").tensor,
        "normalizer.mean": torch.zeros(n_features, dtype=torch.float64),
        "normalizer.std": torch.zeros(n_features, dtype=torch.float64),
    }, path / TENSORS_FILE)
    normalizer = Normalizer(mean=tensors["normalizer.mean"].numpy(), std=tensors["normalizer.std"].numpy(), clip=record.normalizer_clip)
    isv = ISV(registries.layout, device)
    isv.tensor.copy_(tensors["isv"])
    host.start()
    small_replay = attrs.evolve(config.learner, replay=attrs.evolve(config.learner.replay, capacity=config.env.n_envs,
                                                                     prioritized=False))  # acting only: no sampling
    learner = Learner(
        attrs.evolve(config, learner=small_replay), registries.layout, isv, host.loss_components(config),
        n_features + PortfolioObs.size(), device, config.run.seed, n_envs=1,
        combiners=host.gradient_combiners(config),
    )
    with naming_the_file(path / TENSORS_FILE):
        learner.load_policy_state_dict(
            {name.removeprefix("learner."): t for name, t in tensors.items() if name.startswith("learner.")}
        )
    return LoadedPolicy(learner, normalizer, feature_set, record, config, host)


def backtest_checkpoint(path: Path, data_source: str | None = None, device: str = "cpu", window: str = "test",
                        plugins: dict[str, Any] | None = None) -> BacktestOutcome:
    """Backtest the policy in checkpoint ``path`` on its own ``window`` (test, or validation), or on ``data_source``;
    ``plugins`` changes the saved config's ``[plugins]`` (:func:`plugin_overrides`)."""
    if window not in CHECKPOINT_WINDOWS:
        raise CheckpointError(f"window must be one of {', '.join(CHECKPOINT_WINDOWS)}, got {window!r}")
    path = Path(path)
    policy = load_policy(path, device, plugins)
    record, config, host, learner = policy.record, policy.config, policy.host, policy.learner
    if data_source is not None:
        config = attrs.evolve(config, data=attrs.evolve(config.data, source=data_source))
    market: MarketData = load_from_config(config.data)
    features = compute_features(market, policy.feature_set, config.features.make_cache())
    values = np.array(policy.normalizer.apply(features.values), dtype=np.float32)
    values[: features.warmup] = 0.0
    same_data = market.content_hash() == record.data_hash
    if same_data:
        bars, window_name = _saved_window(record, window, str(path), len(market)), window
    else:
        bars, window_name = (features.warmup, len(market)), ALL_BARS
    backtests = evaluation.RunBacktests(market.ohlcv, market.instrument, config.env, env_step_kernel(host.kernels(config)).run)
    results = {"agent": backtests.agent(learner.act_values, values, bars, device), **backtests.baselines(values, bars)}
    stamps = market.timestamps[bars[0] : bars[1]].astype(str).tolist()
    host.close()
    return BacktestOutcome(
        metrics={name: evaluation.metrics_of(result) for name, result in results.items()},
        curves={name: result.equity.tolist() for name, result in results.items()},
        window=(int(bars[0]), int(bars[1])),
        window_name=window_name,
        timestamps=stamps,
        source=config.data.source,
    )

