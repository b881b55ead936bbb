"""The sweep spec: which seeds, folds and config variants ``foxhunt sweep`` runs, declared in TOML.

```toml
seeds = 4                         # run.seed = first_seed .. first_seed + 3
first_seed = 0
folds = [0, 2]                    # optional: these folds of the walk-forward (default: every fold)

[grid]                            # optional: every combination of these values is a variant
"learner.lr" = [1e-4, 3e-4]
"learner.n_step" = [1, 3]

[[variants]]                      # optional: named sets of overrides, each combined with every grid point
name = "wide"
set = { "learner.hidden" = [128, 128] }
```

A file is structured with the same strict cattrs converter as ``foxhunt.toml``: an
unknown key, a wrong type or an impossible value is one
:class:`~foxhunt.errors.ConfigError` naming the file and the key path.
:func:`check_spec` then applies every value to the base config, as a trial will,
so a key that is not a config key or a value the config refuses is refused before
any trial starts.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import attrs

from foxhunt.config import FoxhuntConfig
from foxhunt.config_loading import apply_overrides, load_toml, structure
from foxhunt.errors import ConfigError
from foxhunt.tune.space import override_text

__all__ = ["RESERVED_KEYS", "Variant", "SweepSpec", "parse_spec", "load_spec", "check_spec"]

# Keys a sweep sets itself for every trial, or that would change the trials it plans.
RESERVED_KEYS = {
    "run.seed": "the sweep sets each trial's seed (seeds, first_seed)",
    "folds.only": "the sweep sets each trial's fold (folds)",
    "folds.n_folds": "the folds a sweep plans must be the same in every variant",
    "train.out_dir": "a sweep writes each trial into its own folder",
}


def _unique(values: list[Any]) -> bool:
    texts = [override_text(value) for value in values]
    return len(set(texts)) == len(texts)


@attrs.frozen
class Variant:
    """``[[variants]]``: a named set of ``--set`` overrides (``set`` maps dotted keys to values)."""

    name: str
    set: dict[str, Any] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("'name' must not be empty: it labels the variant's trials in sweep.json and sweep.html")


@attrs.frozen
class SweepSpec:
    """A whole sweep file. :meth:`variants` expands it into the config variants every seed and fold runs."""

    seeds: int = 4
    first_seed: int = 0
    folds: list[int] | None = None
    grid: dict[str, list[Any]] = attrs.Factory(dict)
    variants: list[Variant] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        # Each message starts with the field's quoted name, which the config error renderer turns into the key path.
        if self.seeds < 1:
            raise ValueError(f"'seeds' must be at least 1, got {self.seeds}")
        if self.first_seed < 0:
            raise ValueError(f"'first_seed' must be >= 0, got {self.first_seed}")
        if self.folds is not None:
            if not self.folds:
                raise ValueError("'folds' must list at least one fold, or be left out for every fold")
            if len(set(self.folds)) != len(self.folds) or min(self.folds) < 0:
                raise ValueError(f"'folds' must list distinct fold numbers >= 0, got {self.folds}")
        for key, values in self.grid.items():
            if not values:
                raise ValueError(f"'grid' key {key!r} must list at least one value")
            if not _unique(values):
                raise ValueError(f"'grid' key {key!r} must not repeat a value: {values!r}")
        names = [variant.name for variant in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"'variants' must have distinct names, got {names}")

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))

    def variants_overrides(self) -> list[tuple[str, list[str]]]:
        """Every variant as ``(label, --set overrides)``: each named variant with each grid point, in file order.

        With neither a grid nor variants there is one variant, the base config itself (label ``base``).
        """
        named = [(variant.name, dict(variant.set)) for variant in self.variants] or [("", {})]
        keys = list(self.grid)
        points = [dict(zip(keys, values)) for values in itertools.product(*self.grid.values())]
        result = []
        for (name, settings), point in itertools.product(named, points):
            values = {**settings, **point}
            label = " ".join([name] * bool(name) + [f"{key}={override_text(value)}" for key, value in point.items()])
            result.append((label or "base", [f"{key}={override_text(value)}" for key, value in values.items()]))
        return result


def parse_spec(data: dict[str, Any], source: str) -> SweepSpec:
    """Structure plain TOML data into a :class:`SweepSpec`; every problem in one error naming ``source``."""
    try:
        return structure(data, SweepSpec, source=source)
    except ConfigError as error:
        # the shared renderer speaks of run configs; a sweep file has its own header and its own keys
        text = str(error).replace("invalid configuration:", "invalid sweep spec:", 1)
        raise ConfigError(text.replace("`foxhunt config show` lists every key",
                                       "a sweep file holds seeds, first_seed, folds, [grid] and [[variants]]; "
                                       "`foxhunt sweep --help` shows them")) from None


def load_spec(path: Path) -> SweepSpec:
    """Read and structure a sweep file (syntax, unknown keys, types and values checked)."""
    return parse_spec(load_toml(Path(path)), str(path))


def check_spec(spec: SweepSpec, base: dict[str, Any], source: str) -> None:
    """Refuse a reserved key, a key that is not a config key, a value the run config refuses, or a fold
    outside the base config's ``folds.n_folds``; one :class:`ConfigError` naming each key."""
    problems = []
    entries = [(f"grid[{key!r}]", key, value) for key, values in spec.grid.items() for value in values]
    entries += [(f"variants[{index}].set[{key!r}]", key, value)
                for index, variant in enumerate(spec.variants) for key, value in variant.set.items()]
    for where, key, value in entries:
        reason = RESERVED_KEYS.get(key)
        if reason is not None:
            problems.append(f"{source}: {where}: {key} cannot be swept: {reason}")
            continue
        override = f"{key}={override_text(value)}"
        try:
            structure(apply_overrides(base, [override]), FoxhuntConfig, source=f"--set {override}")
        except ConfigError as error:
            detail = str(error).removeprefix("invalid configuration:\n").strip()
            problems.append(f"{source}: {where}: the value {value!r} is refused by the run config: {detail}")
    n_folds = structure(base, FoxhuntConfig, source=source).folds.n_folds
    outside = [fold for fold in spec.folds or [] if fold >= n_folds]
    if outside:
        problems.append(f"{source}: folds: {outside} are not folds of the config's {n_folds} "
                        f"(folds.n_folds); choose from 0 to {n_folds - 1}")
    if problems:
        raise ConfigError("invalid sweep spec:\n" + "\n".join(f"  {line}" for line in problems))
