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

from foxhunt.checkpoint import checkpoint_layout, read_metadata, verify_layout
from foxhunt.checkpoint_fields import PolicyRecord, read_policy_record
from foxhunt.config import FoxhuntConfig
from foxhunt.config_loading import apply_overrides, load_toml, structure
from foxhunt.data import MarketData, load_from_config
from foxhunt.env.run_kernel import env_step_kernel
from foxhunt.errors import CheckpointError, ConfigError, FingerprintMismatch, FoxhuntError
from foxhunt.features import CORE_TABLE, FeatureSet, FeatureTable, compute_features
from foxhunt.isv import layout_diff
from foxhunt.plugin.host import PluginHost
from foxhunt.policy import Policy, refuse_other_kind, saved_config
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

    ``policy`` acts (``act_values``: expected Q per branch action, unnormalised) and holds the normaliser that
    maps the raw features named by ``feature_set`` to the market part of an observation. ``config`` is the
    checkpoint's own with the caller's ``[plugins]``; ``host`` runs those plugins and is started: close it when
    done. ``feature_table``: the host's feature families (its feature plugins' among them), every name of
    ``feature_set`` in it.
    """

    policy: Policy
    feature_set: FeatureSet
    record: PolicyRecord
    config: FoxhuntConfig
    host: PluginHost
    feature_table: FeatureTable = CORE_TABLE


def load_policy(path: Path, device: str = "cpu", plugins: dict[str, Any] | None = None) -> LoadedPolicy:
    """Verify fold checkpoint ``path`` (kind, plugin set, layout, integrity, tensor shapes) and load its policy.

    ``plugins`` (from :func:`plugin_overrides`) changes the saved config's ``[plugins]`` section.
    """
    path = Path(path)
    metadata = read_metadata(path)
    refuse_other_kind(metadata, path)  # before any plugin is loaded
    record = read_policy_record(metadata, path)  # every key a policy needs, typed, before anything is built
    config = saved_config(record, str(path), plugins)
    host = PluginHost(config.plugins).discover().declare()
    registries = host.freeze()
    _refuse_other_plugins(path, metadata, record, host, registries)  # first: no data is touched for a foreign layout
    policy = Policy.load(path, registries.layout, device, host.encoders(config))  # its encoder, or refused
    saved_set = record.feature_set
    table = host.feature_table(config)  # a feature plugin's families: the checkpoint's features may need them
    try:
        feature_set = FeatureSet(saved_set.name, saved_set.version, saved_set.names)
        table.parity(feature_set.names)  # every name a family of the loaded plugins
    except FoxhuntError as error:
        raise CheckpointError(f"{path}: its feature set cannot be rebuilt ({error}); the checkpoint is damaged or "
                              "altered, or it needs a feature plugin that is not loaded") from None
    host.start()
    return LoadedPolicy(policy, feature_set, record, config, host, table)


def backtest_checkpoint(path: Path, data_source: str | None = None, device: str = "cpu", window: str = "test",
                        plugins: dict[str, Any] | None = None) -> BacktestOutcome:
    """Backtest the policy in checkpoint ``path`` on its own ``window`` (test, or validation), or on ``data_source``;
    ``plugins`` changes the saved config's ``[plugins]`` (:func:`plugin_overrides`)."""
    if window not in CHECKPOINT_WINDOWS:
        raise CheckpointError(f"window must be one of {', '.join(CHECKPOINT_WINDOWS)}, got {window!r}")
    path = Path(path)
    loaded = load_policy(path, device, plugins)
    record, config, host, policy = loaded.record, loaded.config, loaded.host, loaded.policy
    if data_source is not None:
        config = attrs.evolve(config, data=attrs.evolve(config.data, source=data_source))
    market: MarketData = load_from_config(config.data)
    features = compute_features(market, loaded.feature_set, config.features.make_cache(), loaded.feature_table)
    values = np.array(policy.normalizer.apply(features.values), dtype=np.float32)
    values[: features.warmup] = 0.0
    policy.use_features(torch.from_numpy(values).to(device))  # an encoder window gathers its bars from these
    same_data = market.content_hash() == record.data_hash
    if same_data:
        bars, window_name = _saved_window(record, window, str(path), len(market)), window
    else:
        bars, window_name = (features.warmup, len(market)), ALL_BARS
    backtests = evaluation.RunBacktests(market.ohlcv, market.instrument, config.env,
                                        env_step_kernel(host.kernels(config)).run, policy.isv)
    results = {"agent": backtests.agent(policy.act_values, values, bars, device), **backtests.baselines(values, bars)}
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

