"""A sweep's plan: its base config and every trial (variant x seed x fold), kept in the sweep directory.

```
SWEEP_DIR/
  plan.json          the base config (TOML text), the spec, the trials: what a retry runs again
  foxhunt.lock       the driver's lock while it runs trials (one driver per sweep)
  sweep.json         each trial's state and the aggregated figures (foxhunt.sweep.results)
  sweep.html         the same as a page, linking each trial's report.html
  logs/NAME.log      each trial process's output
  NAME/              each trial: an ordinary run directory (as `foxhunt train` writes) plus sweep_trial.json
```

A trial is an ordinary run of the base config plus its variant's overrides, its
``run.seed`` and ``folds.only`` (so it trains and tests one fold of the
walk-forward, at the place the whole walk-forward puts it).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import attrs

from foxhunt import durable
from foxhunt.config import FoxhuntConfig, structure_config
from foxhunt.config_loading import apply_overrides, structure, unstructure
from foxhunt.errors import ConfigError, FoxhuntError
from foxhunt.sweep.spec import SweepSpec, parse_spec

__all__ = ["PLAN_FILE", "Trial", "SweepPlan", "make_plan", "read_plan", "write_plan"]

PLAN_FILE = "plan.json"
PLAN_VERSION = 1


@attrs.frozen
class Trial:
    """One trial: a variant's overrides, one seed and one fold. ``name`` is its run directory's name."""

    name: str
    variant: int
    label: str
    overrides: list[str]
    seed: int
    fold: int

    @property
    def all_overrides(self) -> list[str]:
        """Everything the trial adds to the base config (what ``foxhunt train --set`` would reproduce it with)."""
        return [*self.overrides, f"run.seed={self.seed}", f"folds.only={self.fold}"]


@attrs.frozen
class SweepPlan:
    """The base config (resolved once, as TOML) and the trials built from it."""

    base_config: str
    spec: SweepSpec
    trials: list[Trial]
    reports: bool = True  # each trial builds its report.html (a few seconds of matplotlib per trial)

    def trial(self, name: str) -> Trial:
        for trial in self.trials:
            if trial.name == name:
                return trial
        raise FoxhuntError(f"the sweep has no trial {name!r}; its trials are {', '.join(t.name for t in self.trials)}")

    def trial_config(self, trial: Trial) -> FoxhuntConfig:
        data = apply_overrides(tomllib.loads(self.base_config), trial.all_overrides)
        return structure_config(data, f"sweep base config + --set {' '.join(trial.all_overrides)}")

    @property
    def device(self) -> str:
        return structure(tomllib.loads(self.base_config), FoxhuntConfig, source="sweep base config").run.device


def make_plan(base_config: str, spec: SweepSpec, *, reports: bool = True) -> SweepPlan:
    """Every trial of ``spec`` on ``base_config``: variants outermost, then seeds, then folds."""
    n_folds = structure(tomllib.loads(base_config), FoxhuntConfig, source="sweep base config").folds.n_folds
    folds = spec.folds if spec.folds is not None else list(range(n_folds))
    variants = spec.variants_overrides()
    trials = []
    for index, (label, overrides) in enumerate(variants):
        prefix = f"v{index}_" if len(variants) > 1 else ""
        for seed in spec.seed_list:
            for fold in folds:
                trials.append(Trial(f"{prefix}seed{seed}_fold{fold}", index, label, overrides, seed, fold))
    return SweepPlan(base_config, spec, trials, reports)


def write_plan(directory: Path, plan: SweepPlan) -> Path:
    data = {"version": PLAN_VERSION, "base_config": plan.base_config, "spec": unstructure(plan.spec),
            "reports": plan.reports, "trials": [attrs.asdict(trial) for trial in plan.trials]}
    return durable.write_text(Path(directory) / PLAN_FILE, json.dumps(data, indent=1))


def read_plan(directory: Path) -> SweepPlan:
    """The plan a sweep directory holds; a folder without one, or a damaged one, is one paragraph."""
    path = Path(directory) / PLAN_FILE
    if not path.is_file():
        raise FoxhuntError(f"{directory}: no {PLAN_FILE}; is this a folder `foxhunt sweep` wrote?")
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        spec = parse_spec(data["spec"], str(path))
        trials = [Trial(**trial) for trial in data["trials"]]
        return SweepPlan(str(data["base_config"]), spec, trials, bool(data["reports"]))
    except (ValueError, KeyError, TypeError, ConfigError) as error:
        raise FoxhuntError(f"{path}: cannot read the sweep plan ({error}); the file is damaged") from None
