"""``foxhunt tune``: hyperparameter search over ordinary training runs, with Optuna.

:mod:`foxhunt.tune.space` reads and checks the TOML search space; :mod:`foxhunt.tune.objective`
turns a run's per-epoch validation into Optuna reports and prunes; :mod:`foxhunt.tune.study`
opens (or resumes) a study in its storage and runs trials, each an ordinary run directory;
:mod:`foxhunt.tune.worker` is one worker of a study and :mod:`foxhunt.tune.workers` runs several
(``--workers N``: processes here, or Ray tasks).
Optuna itself is imported only when a study is opened, so it stays an optional extra.
"""

from foxhunt.tune.objective import EpochReporter, TrialStop, direction_of
from foxhunt.tune.space import ParameterSpec, PrunerSettings, SamplerSettings, SearchSpace, check_space, load_space
from foxhunt.tune.study import (
    StudySpec, load_study, prepare_study, run_study, run_trial, run_trials, start_study, trial_record, trial_rows,
)

__all__ = [
    "EpochReporter",
    "TrialStop",
    "direction_of",
    "ParameterSpec",
    "PrunerSettings",
    "SamplerSettings",
    "SearchSpace",
    "check_space",
    "load_space",
    "StudySpec",
    "load_study",
    "prepare_study",
    "run_study",
    "run_trial",
    "run_trials",
    "start_study",
    "trial_record",
    "trial_rows",
]
