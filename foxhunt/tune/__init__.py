"""``foxhunt tune``: hyperparameter search over ordinary training runs, with Optuna.

:mod:`foxhunt.tune.space` reads and checks the TOML search space; :mod:`foxhunt.tune.objective`
turns a run's per-epoch validation into Optuna reports and prunes; :mod:`foxhunt.tune.study`
opens (or resumes) a study in its storage and runs trials, each an ordinary run directory.
Optuna itself is imported only when a study is opened, so it stays an optional extra.
"""
