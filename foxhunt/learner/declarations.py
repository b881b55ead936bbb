"""The learner's state-reset entries (invariant 1), declared as a core plugin.

The lead registers this module with the plugin host as the core's own plugin
(``host.add_plugin(foxhunt.learner.declarations, "learner")``); its
``foxhunt_declare`` claims one entry per piece of learner state, and
:meth:`foxhunt.learner.Learner.attach_state` binds the live objects. The
learner owns no ISV slots: everything it reads there belongs to the adaptive
plugins (see :mod:`foxhunt.learner.slots`).

Categories, and why:

- network, target network, spectral u/v, PopArt statistics: **training-persist**.
  Walk-forward training carries the agent across folds; u/v and PopArt
  statistics are coupled to those weights and are only valid together with them.
- AdamW moments and step: **fold-reset**. Second-moment estimates from the last
  fold's regime would mis-scale the first steps of the next; zeroing them with
  the step count restarts bias correction cleanly.
- learning-rate schedule and α/β anneal position: **fold-reset** (each fold is a
  fresh annealing run over its own training window).
- replay contents and priorities: **fold-reset**: a fold trains on its own
  window only.
- gradient statistics (norms, safety-clip count): **training-persist**; the
  safety-clip count is a whole-run invariant check (it must stay 0).
- the learner's random generator (τ draws, replay draws): **training-persist**.
- the gradient combiner's learned values (uncertainty weighting's per-component
  log-variances; none for the default ``budgeted_sum``): **training-persist**,
  like the network whose losses they weigh. Their Adam moments are part of the
  optimiser's entry and reset with it.

The module also provides the core's own gradient combiner, ``budgeted_sum``
(:mod:`foxhunt.learner.combiners`), through ``foxhunt_gradient_combiners``, and
the core's own encoder, ``mlp`` (:mod:`foxhunt.learner.encoders`), through
``foxhunt_encoders``: a run with every optional plugin disabled still has its
default combiner and encoder. An encoder's parameters are part of the network
(its entries above); the windows it reads are rebuilt from the replay's bar
indices (the replay's entry) and the fold's feature matrix, so it adds no entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from foxhunt.plugin.spec import hookimpl
from foxhunt.learner.combiners import BUDGETED_SUM
from foxhunt.learner.encoders import MLP_ENCODER
from foxhunt.learner.optim import reset_optimizer
from foxhunt.state import ResetCategory

__all__ = ["LearnerStateSpec", "LEARNER_STATE", "FOXHUNT_AUDIT", "foxhunt_declare", "foxhunt_gradient_combiners",
           "foxhunt_encoders"]

# The core's combiner is a component like a plugin's, so the audit needs its row wherever foxhunt is installed
# and whatever audit folders a check is given: it ships here, as a plugin's own rows do (docs/audits/components.md
# has the same row for readers of the repository).
FOXHUNT_AUDIT = """
| component | kind | plugin | status | tests |
|---|---|---|---|---|
| `budgeted_sum` | combiner | foxhunt.learner (core: foxhunt.learner.combiners) | wired | tests/learner/test_combiners.py, tests/builtin_plugins/combiners/test_norm_guarantee.py, tests/learner/test_pinned_update.py |
| `mlp` | encoder | foxhunt.learner (core: foxhunt.learner.encoders) | wired | tests/learner/test_encoders.py |
"""


def _reset_schedule(schedule: Any) -> None:
    schedule.reset()


def _reset_replay(replay: Any) -> None:
    replay.reset()


@attrs.frozen
class LearnerStateSpec:
    name: str
    category: ResetCategory
    reset: Callable[[Any], None] | None
    doc: str


LEARNER_STATE: tuple[LearnerStateSpec, ...] = (
    LearnerStateSpec("learner.network", ResetCategory.TRAINING_PERSIST, None, "online network parameters"),
    LearnerStateSpec("learner.target_network", ResetCategory.TRAINING_PERSIST, None, "Polyak-averaged target network"),
    LearnerStateSpec("learner.spectral", ResetCategory.TRAINING_PERSIST, None, "power-iteration u/v of every weight"),
    LearnerStateSpec("learner.popart", ResetCategory.TRAINING_PERSIST, None, "PopArt per-branch return mean and second moment"),
    LearnerStateSpec("learner.optimizer", ResetCategory.FOLD_RESET, reset_optimizer, "AdamW moments and step count"),
    LearnerStateSpec("learner.schedule", ResetCategory.FOLD_RESET, _reset_schedule, "learning-rate schedule position and lr"),
    LearnerStateSpec("learner.replay", ResetCategory.FOLD_RESET, _reset_replay,
                     "replay transitions, priorities, write cursor, α/β anneal"),
    LearnerStateSpec("learner.gradients", ResetCategory.TRAINING_PERSIST, None,
                     "per-component gradient norms and the safety-clip count"),
    LearnerStateSpec("learner.rng", ResetCategory.TRAINING_PERSIST, None, "generator of τ samples and replay draws"),
    LearnerStateSpec("learner.combiner", ResetCategory.TRAINING_PERSIST, None,
                     "the gradient combiner's learned values per component (none for budgeted_sum)"),
)


@hookimpl
def foxhunt_declare(registrar: Any) -> None:
    """Claim every learner state entry with its category and reset dispatch."""
    for spec in LEARNER_STATE:
        registrar.state(spec.name, spec.category, reset=spec.reset, doc=spec.doc)


@hookimpl
def foxhunt_gradient_combiners() -> list[Any]:
    """The core's combiner, ``budgeted_sum`` (invariant 9's rule, and ``[learner] combiner``'s default)."""
    return [BUDGETED_SUM]


@hookimpl
def foxhunt_encoders() -> list[Any]:
    """The core's encoder, ``mlp`` (one bar, the identity: ``[learner] encoder``'s default)."""
    return [MLP_ENCODER]
