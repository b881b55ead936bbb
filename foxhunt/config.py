"""The root configuration: one frozen attrs class per section, composed here.

Each section's class lives beside the code it configures; this module only
composes them and resolves a run's config from defaults, a TOML file and
``--set`` overrides (in that order). A plugin's settings are not a section of
the core: they sit in ``[plugins.<name>]`` and are structured by the plugin's
own class when it declares (:mod:`foxhunt.plugin.settings`); a key the core used
to own there is refused with the key that replaces it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import tomli_w
from cattrs.gen import make_dict_structure_fn

from foxhunt.config_loading import MovedKeysError, apply_overrides, converter, load_toml, structure, unstructure
from foxhunt.data.config import DataConfig
from foxhunt.env.config import EnvConfig
from foxhunt.features.config import FeatureConfig
from foxhunt.folds import FoldConfig
from foxhunt.learner.config import LearnerConfig
from foxhunt.plugin.settings import SELECTION_KEYS, PluginSelection, moved_keys
from foxhunt.profiles import PROFILE_NAMES, apply_profile, plugin_defaults
from foxhunt.trainer.config import TrainConfig

__all__ = ["RunConfig", "FoxhuntConfig", "load_config", "structure_config", "config_data", "dump_config"]

DEVICES = ("auto", "cpu", "cuda")


@attrs.frozen
class RunConfig:
    """``[run]``: where and how a run happens."""

    seed: int = attrs.field(default=0, validator=[attrs.validators.ge(0), attrs.validators.le(2**64 - 1)])  # 64 bits
    device: str = attrs.field(default="auto", validator=attrs.validators.in_(DEVICES))
    # torch's CPU threads for `foxhunt train` (0: torch's own default). One is the default because the
    # networks are small and the env kernels already use every core: on 2 shared cores, two torch threads
    # spinning against numba's were measured up to 6x slower.
    threads: int = attrs.field(default=1, validator=attrs.validators.ge(0))
    # Run-size defaults by device (foxhunt/profiles.py); "auto" follows the device. The resolved name is stored.
    profile: str = attrs.field(default="auto", validator=attrs.validators.in_(PROFILE_NAMES))
    # CUDA only: TF32 matmuls (docs/gpu.md, "TF32", gives their accuracy cost against fp32).
    tf32: bool = True
    # CUDA only: capture one vector step and one learner update as CUDA graphs per fold and replay them.
    cuda_graph: bool = True
    # Regression bands checked at every epoch boundary (docs/bands.md): a bands file, or None for no check.
    bands: str | None = None
    # Per-epoch metrics also as TensorBoard event files in RUN_DIR/tensorboard/ (the tensorboard extra;
    # foxhunt/trainer/tensorboard_log.py lists the scalars).
    tensorboard: bool = False
    # Worker processes of one training run on one host (docs/multi-device.md): 1 is the single-process run; N > 1
    # spawns N ranks (cuda:0..N-1 on CUDA, N CPU processes otherwise), data-parallel over one all-reduce per update.
    devices: int = attrs.field(default=1, validator=attrs.validators.ge(1))


@attrs.frozen
class FoxhuntConfig:
    """Every section of a foxhunt config file."""

    run: RunConfig = RunConfig()
    plugins: PluginSelection = PluginSelection()
    data: DataConfig = DataConfig()
    features: FeatureConfig = FeatureConfig()
    folds: FoldConfig = FoldConfig()
    env: EnvConfig = EnvConfig()
    learner: LearnerConfig = LearnerConfig()
    train: TrainConfig = TrainConfig()


_structure_sections = make_dict_structure_fn(FoxhuntConfig, converter)


def _structure_root(data: Any, _: type) -> FoxhuntConfig:
    """Every section, after refusing the keys that moved to a plugin's section (each named with its new key)."""
    if isinstance(data, Mapping) and (moves := moved_keys(data)):
        raise MovedKeysError(moves)
    return _structure_sections(data, FoxhuntConfig)


converter.register_structure_hook(FoxhuntConfig, _structure_root)


def load_config(path: Path | None = None, overrides: Iterable[str] = ()) -> FoxhuntConfig:
    """Defaults, then ``path`` (if given), then ``--set`` overrides, then the run profile; errors name their source.

    The profile (``[run] profile``, see :mod:`foxhunt.profiles`) fills only keys
    that neither the file nor an override set.
    """
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        data = load_toml(Path(path))
        source = str(path)
        structure(data, FoxhuntConfig, source=source)
    overrides = list(overrides)
    if overrides:
        data = apply_overrides(data, overrides)
        source = f"{source} + --set {' '.join(overrides)}" if path is not None else f"--set {' '.join(overrides)}"
    return structure_config(data, source)


def structure_config(data: Mapping[str, Any], source: str) -> FoxhuntConfig:
    """A :class:`FoxhuntConfig` from plain config ``data``, with its run-size profile applied: the profile fills
    the config keys ``data`` leaves out, and gives the plugins its values for their settings
    (``PluginSelection.profile_settings``)."""
    resolved = apply_profile(dict(data))
    config = structure(resolved, FoxhuntConfig, source=source)
    defaults = plugin_defaults(resolved)
    if not defaults:
        return config
    return attrs.evolve(config, plugins=attrs.evolve(config.plugins, profile_settings=defaults))


def config_data(config: FoxhuntConfig, plugin_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The config as plain data; ``plugin_settings`` (``PluginHost.all_settings()``) resolves the plugins' tables.

    Each plugin in ``plugin_settings`` gets its ``[plugins.<name>]`` table as
    resolved, every default included (what ``foxhunt config show`` prints).
    Without it the tables are kept as written, which is what a run records in
    ``config.toml`` and its checkpoints, and what ``--resume`` compares.
    """
    data = unstructure(config)
    plugins = data["plugins"]
    for name, settings in (plugin_settings or {}).items():
        plugins[name] = unstructure(settings)
    tables = sorted(name for name in plugins if name not in SELECTION_KEYS)
    data["plugins"] = {**{key: plugins[key] for key in SELECTION_KEYS}, **{name: plugins[name] for name in tables}}
    return data


def dump_config(config: FoxhuntConfig, plugin_settings: Mapping[str, Any] | None = None) -> str:
    """The fully resolved config as TOML (what ``config.toml`` in a run directory holds); see :func:`config_data`."""
    return tomli_w.dumps(_drop_none(config_data(config, plugin_settings)))


def _drop_none(data: Any) -> Any:
    # TOML has no null: an unset optional key is simply absent, which loads back as its default.
    if isinstance(data, dict):
        return {k: _drop_none(v) for k, v in data.items() if v is not None}
    return data
