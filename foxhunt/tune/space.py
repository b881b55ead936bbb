"""The search space of ``foxhunt tune``, declared in TOML and checked like every other config.

```toml
[space."learner.lr"]            # a dotted config key, applied to each trial as --set learner.lr=VALUE
type = "float"                  # "float", "int" or "categorical"
low = 1e-5
high = 1e-3
log = true                      # sample on a log scale (float and int; low must be > 0)

[space."learner.hidden"]
type = "categorical"
choices = [[32, 32], [64, 64]]  # any TOML values, lists included

[pruner]                        # optional: optuna's median pruner
startup_trials = 5              # trials that must finish before any trial is pruned
warmup_steps = 0                # steps (epochs, counted over folds) of a trial that are never pruned

[sampler]                       # optional: optuna's TPE sampler
startup_trials = 10             # random trials before TPE starts modelling
```

A file is structured with the same strict cattrs converter as ``foxhunt.toml``, so an unknown
key, a wrong type or an impossible range is one :class:`~foxhunt.errors.ConfigError` naming
the file and the key path. :func:`check_space` then proves every bound and choice is a value
the run config accepts, before any trial starts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs
import tomli_w

from foxhunt.config import FoxhuntConfig
from foxhunt.config_loading import apply_overrides, load_toml, structure, unstructure
from foxhunt.errors import ConfigError, PluginError
from foxhunt.plugin.settings import SELECTION_KEYS
from foxhunt.plugin.host import PluginHost

__all__ = [
    "PARAMETER_TYPES",
    "UNTUNABLE",
    "ParameterSpec",
    "PrunerSettings",
    "SamplerSettings",
    "SearchSpace",
    "load_space",
    "parse_space",
    "check_space",
    "override_text",
]

PARAMETER_TYPES = ("float", "int", "categorical")

# Keys that change what a trial is measured on (or where it runs), so trials could no longer be compared:
# a key equal to one of these, or under one of these sections, is refused in a search space.
UNTUNABLE = {
    "data": "the data every trial is measured on",
    "folds": "the validation windows every trial is measured on",
    "train.validation_metric": "the metric the study optimises",
    "train.out_dir": "where runs are written",
    "run": "how and where a trial runs (seed, device, size profile, threads); a tuned seed selects noise",
}


def _is_primitive(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str))


@attrs.frozen
class ParameterSpec:
    """One dimension of the search: a float or int range, or a list of choices."""

    type: str = attrs.field(validator=attrs.validators.in_(PARAMETER_TYPES))
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] | None = None

    def __attrs_post_init__(self) -> None:
        # attrs validators see one field at a time; these rules tie fields together. Each message starts
        # with the field's quoted name, which the config error renderer turns into the key path.
        if self.type == "categorical":
            for name in ("low", "high", "step"):
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' is for float and int parameters; a categorical one takes choices")
            if self.log:
                raise ValueError("'log' is for float and int parameters; a categorical one takes choices")
            if not self.choices:
                raise ValueError("'choices' must list at least one value for a categorical parameter")
            rendered = [override_text(choice) for choice in self.choices]
            if len(set(rendered)) != len(rendered):
                raise ValueError(f"'choices' must not repeat a value: {list(self.choices)!r}")
            return
        if self.choices is not None:
            raise ValueError(f"'choices' is for categorical parameters; a {self.type} one takes low and high")
        if self.low is None or self.high is None:
            missing = "low" if self.low is None else "high"
            raise ValueError(f"'{missing}' is required for a {self.type} parameter")
        if self.type == "int":
            for name in ("low", "high", "step"):
                value = getattr(self, name)
                if value is not None and not float(value).is_integer():
                    raise ValueError(f"'{name}' must be an integer for an int parameter, got {value!r}")
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise ValueError(f"'low' and 'high' must be finite, got {self.low!r} and {self.high!r}")
        if self.low > self.high:
            raise ValueError(f"'high' must be at least low, got low {self.low!r} and high {self.high!r}")
        if self.log and self.low <= 0:
            raise ValueError(f"'low' must be > 0 on a log scale, got {self.low!r}")
        if self.step is not None:
            if self.step <= 0:
                raise ValueError(f"'step' must be > 0, got {self.step!r}")
            if self.log:
                raise ValueError("'step' cannot be combined with log = true (optuna samples one or the other)")

    def values_to_check(self) -> list[Any]:
        """The values whose acceptance by the run config proves the whole range or choice list is usable."""
        if self.type == "categorical":
            return list(self.choices)
        if self.type == "int":
            return [int(self.low), int(self.high)]
        return [float(self.low), float(self.high)]

    def suggest(self, trial: Any, name: str) -> Any:
        """Ask an optuna trial for this parameter's value (the config value, lists included)."""
        if self.type == "float":
            return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)
        if self.type == "int":
            step = int(self.step) if self.step is not None else 1
            return trial.suggest_int(name, int(self.low), int(self.high), step=step, log=self.log)
        if all(_is_primitive(choice) for choice in self.choices):
            return trial.suggest_categorical(name, list(self.choices))
        # optuna stores only primitive choices; a list such as hidden = [64, 64] goes by its TOML text.
        texts = [override_text(choice) for choice in self.choices]
        return self.choices[texts.index(trial.suggest_categorical(name, texts))]


@attrs.frozen
class PrunerSettings:
    """``[pruner]``: optuna's ``MedianPruner`` over the per-epoch validation metric."""

    startup_trials: int = attrs.field(default=5, validator=attrs.validators.ge(0))
    warmup_steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))


@attrs.frozen
class SamplerSettings:
    """``[sampler]``: optuna's ``TPESampler`` (its seed is ``foxhunt tune --seed``)."""

    startup_trials: int = attrs.field(default=10, validator=attrs.validators.ge(0))


@attrs.frozen
class SearchSpace:
    """A whole space file: the parameters by dotted config key, and the pruner and sampler settings."""

    space: dict[str, ParameterSpec] = attrs.field(validator=lambda _, __, value: _not_empty(value))
    pruner: PrunerSettings = PrunerSettings()
    sampler: SamplerSettings = SamplerSettings()

    def suggest(self, trial: Any) -> dict[str, Any]:
        """One value per key, drawn by ``trial``, in the file's order."""
        return {key: spec.suggest(trial, key) for key, spec in self.space.items()}

    def overrides(self, params: dict[str, Any]) -> list[str]:
        """``--set`` texts for ``params``: what a trial adds to the base config (and what reproduces it)."""
        return [f"{key}={override_text(value)}" for key, value in params.items()]

    def to_toml(self) -> str:
        """The space as a TOML file (stored with the study, so a resumed study knows its space)."""
        return tomli_w.dumps(_drop_none(unstructure(self)))


def _not_empty(space: dict[str, ParameterSpec]) -> None:
    if not space:
        raise ValueError("'space' must declare at least one parameter, e.g. [space.\"learner.lr\"]")


def _drop_none(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _drop_none(v) for k, v in data.items() if v is not None}
    return data


def override_text(value: Any) -> str:
    """A config value as the one-line TOML text after ``--set KEY=`` (strings quoted, lists in brackets)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(override_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{override_text(str(k))} = {override_text(v)}" for k, v in value.items()) + "}"
    return tomli_w.dumps({"value": value}).strip().removeprefix("value = ")


def parse_space(data: dict[str, Any], source: str) -> SearchSpace:
    """Structure plain TOML data into a :class:`SearchSpace`; every problem in one error naming ``source``."""
    if "space" not in data:
        raise ConfigError(
            f"invalid search space:\n  {source}: space: missing; declare at least one parameter, e.g.\n"
            '  [space."learner.lr"]\n  type = "float"\n  low = 1e-5\n  high = 1e-3\n  log = true'
        )
    try:
        return structure(data, SearchSpace, source=source)
    except ConfigError as error:
        # the shared renderer speaks of run configs; a space file has its own header and its own keys
        text = str(error).replace("invalid configuration:", "invalid search space:", 1)
        raise ConfigError(text.replace(_RUN_CONFIG_HINT, _SPACE_HINT)) from None


_RUN_CONFIG_HINT = "`foxhunt config show` lists every key"
_SPACE_HINT = 'a space file holds [space."KEY"] tables, [pruner] and [sampler]; `foxhunt tune --help` shows them'


def load_space(path: Path) -> SearchSpace:
    """Read and structure a space file (syntax, unknown keys, types and ranges checked)."""
    return parse_space(load_toml(Path(path)), str(path))


def check_space(space: SearchSpace, base: dict[str, Any], source: str) -> None:
    """Refuse a key that is not a tunable config key, or a bound or choice the run config would reject.

    ``base`` is the plain data of the base config (file + ``--set``); each value is applied on top of it
    exactly as a trial will apply it, and the result structured as a :class:`FoxhuntConfig`.
    """
    problems = []
    for key, spec in space.space.items():
        path = f"{source}: space[{key!r}]"
        parts = key.split(".")
        if any(not part for part in parts):
            problems.append(f"{path}: not a dotted config key such as 'learner.lr'")
            continue
        reason = next((why for prefix, why in UNTUNABLE.items() if key == prefix or key.startswith(prefix + ".")), None)
        if reason is not None:
            problems.append(f"{path}: {key} is not tunable: it sets {reason}, so trials could not be compared")
            continue
        plugin_key = _is_plugin_key(parts)
        if not plugin_key and not _is_leaf_key(parts):
            problems.append(f"{path}: {key} is not a config key (`foxhunt config show` lists every key)")
            continue
        for value in spec.values_to_check():
            override = f"{key}={override_text(value)}"
            try:
                config = structure(apply_overrides(base, [override]), FoxhuntConfig, source=f"--set {override}")
                if plugin_key:
                    _check_plugin_settings(config)
            except ConfigError as error:
                detail = str(error).removeprefix("invalid configuration:\n").strip()
                problems.append(f"{path}: the value {value!r} is refused by the run config: {detail}")
            except PluginError as error:
                detail = "; ".join(str(problem) for problem in error.problems)
                problems.append(f"{path}: the value {value!r} is refused by its plugin: {detail}")
    if problems:
        raise ConfigError("invalid search space:\n" + "\n".join(f"  {line}" for line in problems))


def _is_plugin_key(parts: list[str]) -> bool:
    """Whether ``parts`` names a setting in a plugin's own table, ``plugins.<name>.<key>``."""
    return len(parts) >= 3 and parts[0] == "plugins" and parts[1] not in SELECTION_KEYS


def _check_plugin_settings(config: FoxhuntConfig) -> None:
    """Let the plugins structure their tables of ``config`` (a trial's run would): raises ``PluginError``."""
    PluginHost(config.plugins).discover().declare().freeze()


def _is_leaf_key(parts: list[str]) -> bool:
    """Whether ``parts`` names a value of :class:`FoxhuntConfig` (not a section, not a missing key).

    Sections that hold free-form tables (plugin settings) accept any key below them; there the
    structuring of each value in :func:`check_space` is the judge.
    """
    data: Any = unstructure(FoxhuntConfig())
    for depth, part in enumerate(parts):
        if not isinstance(data, dict):
            return False
        if part not in data:
            # a table with free-form keys (its default is empty): structuring the values decides
            return not data and depth > 0
        data = data[part]
    return not isinstance(data, dict) or not data

