"""``sweep.json``: every trial's state and the aggregated figures, rewritten atomically after each trial.

The file is replaced through :func:`foxhunt.durable.write_text` after every
finished trial, so a driver killed mid-sweep leaves the last whole file, and a
retry (``foxhunt sweep --retry``) reads the trials' states back from it. A trial
counts as complete only while its run directory holds ``summary.json``; one
recorded complete whose folder was since deleted is missing again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from foxhunt import durable
from foxhunt.errors import FoxhuntError
from foxhunt.sweep.aggregate import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, aggregate
from foxhunt.sweep.page import write_page
from foxhunt.sweep.outcome import COMPLETE, FAILED, MISSING, TrialOutcome
from foxhunt.sweep.plan import SweepPlan

__all__ = ["RESULTS_FILE", "results_data", "read_outcomes", "write_results"]

RESULTS_FILE = "sweep.json"
RESULTS_VERSION = 1


def read_outcomes(directory: Path) -> dict[str, TrialOutcome]:
    """The trials' outcomes recorded in ``sweep.json`` ({} before the first trial finished)."""
    path = Path(directory) / RESULTS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {
            record["name"]: TrialOutcome(record["state"], record.get("reason"), record.get("exit_code"),
                                         record.get("signal"), record.get("seconds"), record.get("host"))
            for record in data["trials"] if record["state"] in (COMPLETE, FAILED)
        }
    except (ValueError, KeyError, TypeError) as error:
        raise FoxhuntError(f"{path}: cannot read it ({error}); the file is damaged. Delete it and run "
                           "`foxhunt sweep --retry` to run every trial that has no summary.json again") from None


def _overall(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["overall"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def results_data(directory: Path, plan: SweepPlan, outcomes: Mapping[str, TrialOutcome]) -> dict[str, Any]:
    """What ``sweep.json`` holds: trials with their states, counts, and per variant the aggregated figures."""
    directory = Path(directory)
    trials, overall_by_variant = [], {}
    for trial in plan.trials:
        outcome = outcomes.get(trial.name)
        overall = _overall(directory / trial.name) if outcome is not None and outcome.state == COMPLETE else None
        if outcome is None or (outcome.state == COMPLETE and overall is None):
            outcome = TrialOutcome(MISSING)
        if overall is not None:
            overall_by_variant.setdefault(trial.variant, []).append(overall)
        trials.append({"name": trial.name, "variant": trial.variant, "seed": trial.seed, "fold": trial.fold,
                       **outcome.record(), "run_dir": trial.name,
                       **({"report": f"{trial.name}/report.html"} if (directory / trial.name / "report.html").is_file()
                          else {}),
                       **({"test": overall} if overall is not None else {})})
    variants = []
    labels = dict.fromkeys((trial.variant, trial.label, tuple(trial.overrides)) for trial in plan.trials)
    for index, label, overrides in labels:
        members = [t for t in trials if t["variant"] == index]
        variants.append({
            "variant": index, "label": label, "overrides": list(overrides), "trials": len(members),
            "complete": sum(t["state"] == COMPLETE for t in members),
            "metrics": aggregate(overall_by_variant.get(index, [])),
        })
    counts = {state: sum(t["state"] == state for t in trials) for state in (COMPLETE, FAILED, MISSING)}
    return {
        "version": RESULTS_VERSION,
        "sweep": directory.name,
        "seeds": plan.spec.seed_list,
        "folds": sorted({trial.fold for trial in plan.trials}),
        "counts": counts,
        "bootstrap": {"seed": BOOTSTRAP_SEED, "resamples": BOOTSTRAP_RESAMPLES, "level": 0.95},
        "variants": variants,
        "trials": trials,
    }


def write_results(directory: Path, plan: SweepPlan, outcomes: Mapping[str, TrialOutcome]) -> dict[str, Any]:
    """Write ``sweep.json`` and ``sweep.html`` (each atomically); returns the data."""
    data = results_data(directory, plan, outcomes)
    durable.write_text(Path(directory) / RESULTS_FILE, json.dumps(data, indent=1))
    write_page(Path(directory), data)
    return data
