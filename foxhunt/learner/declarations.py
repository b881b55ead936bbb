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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from foxhunt.hookspecs import hookimpl
from foxhunt.learner.optim import reset_optimizer
from foxhunt.state import ResetCategory

__all__ = ["LearnerStateSpec", "LEARNER_STATE", "foxhunt_declare"]


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
)


@hookimpl
def foxhunt_declare(registrar: Any) -> None:
    """Claim every learner state entry with its category and reset dispatch."""
    for spec in LEARNER_STATE:
        registrar.state(spec.name, spec.category, reset=spec.reset, doc=spec.doc)
