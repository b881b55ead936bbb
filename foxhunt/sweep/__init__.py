"""``foxhunt sweep``: one config over seeds x folds (x variants) as independent trials, aggregated.

:mod:`~foxhunt.sweep.spec` reads the sweep file (seeds, folds, grid, variants);
:mod:`~foxhunt.sweep.plan` expands it into trials, each an ordinary run of one
fold (``folds.only``); :mod:`~foxhunt.sweep.trial` trains one trial in its own
process; :mod:`~foxhunt.sweep.local` and :mod:`~foxhunt.sweep.ray_cluster` run
trial processes (Ray is imported only when it is used);
:mod:`~foxhunt.sweep.outcome` says what became of a trial;
:mod:`~foxhunt.sweep.aggregate` is the statistics; :mod:`~foxhunt.sweep.results`
and :mod:`~foxhunt.sweep.page` write ``sweep.json`` and ``sweep.html``;
:mod:`~foxhunt.sweep.driver` ties them together (start, run pending, retry).
"""

from foxhunt.sweep.aggregate import aggregate, bootstrap_ci, describe
from foxhunt.sweep.driver import pending_trials, run_pending, start_sweep
from foxhunt.sweep.local import LocalExecutor, TrialJob, default_workers
from foxhunt.sweep.outcome import TrialOutcome
from foxhunt.sweep.plan import SweepPlan, Trial, make_plan, read_plan
from foxhunt.sweep.ray_cluster import RayExecutor
from foxhunt.sweep.results import read_outcomes, write_results
from foxhunt.sweep.spec import SweepSpec, Variant, check_spec, load_spec, parse_spec

__all__ = [
    "aggregate", "bootstrap_ci", "describe",
    "pending_trials", "run_pending", "start_sweep",
    "LocalExecutor", "TrialJob", "default_workers",
    "TrialOutcome",
    "SweepPlan", "Trial", "make_plan", "read_plan",
    "RayExecutor",
    "read_outcomes", "write_results",
    "SweepSpec", "Variant", "check_spec", "load_spec", "parse_spec",
]
