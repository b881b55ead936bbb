"""Plateau recovery (``[train.recovery]``, off by default): when a fold's validation metric stalls, rewind and shake.

At every epoch end of a fold the trainer hands this module the epoch's validation score (the run's
``train.validation_metric``). It keeps

* a ring of the last ``ring_size`` checkpoints of the fold, in memory: copies of the learner's model state
  (online and target networks, spectral-norm vectors, PopArt statistics, the combiner's learned values), each
  with its *improvement rate*, the gain of its epoch's score over the epoch before (signed so that higher is
  better, also for ``max_drawdown``; the fold's first epoch has none and ranks last);
* a plateau detector: an epoch whose score beats the best so far by at least ``min_delta`` resets the count of
  stale epochs, any other epoch (a non-finite score too) adds one; ``patience`` stale epochs in a row are a
  plateau.

On a plateau, at most ``max_recoveries`` times per fold, the recovery

1. rewinds the learner's model state to the ring's checkpoint of the highest improvement rate (ties: the later
   epoch), the point where the fold was learning fastest;
2. shrinks and perturbs the online network's parameters, ``w ← λ·w + σ·ξ`` with ``ξ ~ N(0, 1)`` drawn from the
   learner's seeded generator (Ash & Adams 2020; ``shrink`` = λ, ``noise`` = σ), then projects the weight
   matrices back under σ_max (spectral norm); the target network keeps the rewound copy;
3. zeroes the Adam moments and step counts of the chosen parameter groups (``reset_moments``: ``trunk`` the
   shared trunk, ``heads`` every other network parameter, ``all`` everything the optimiser steps);
4. for the next ``boost_epochs`` epochs, adds ``epsilon_boost`` to the exploration rate of every branch (capped
   at 1; ``train.exploration = "epsilon"``) or multiplies the Boltzmann temperature by
   ``temperature_multiplier``, and multiplies the learning rate by ``lr_multiplier``
   (:meth:`foxhunt.learner.optim.LRSchedule.set_scale`, under either schedule).

The replay, the optimiser's other parameters and the random streams are not rewound. What fired is the epoch's
``recovery`` record in ``metrics.jsonl`` (:meth:`PlateauRecovery.observe` and :meth:`PlateauRecovery.recover`)
and a table in ``report.html``.

Resume: the counters (recoveries used, stale epochs, best score, the last score, boost epochs left, the epoch
of the last recovery) are in the resume checkpoint's metadata (:meth:`PlateauRecovery.state`); the ring is not
(it would add ``ring_size`` model copies to every resume checkpoint) and starts empty on resume, so a resumed run
can rewind only to checkpoints taken after it resumed. When a recovery fires at the epoch that is also the
fold's best, the best policy is written before the rewind (and so before that epoch's resume checkpoint).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import torch

from foxhunt.trainer.config import MOMENT_GROUPS, RecoveryConfig

if TYPE_CHECKING:
    from foxhunt.learner import Learner

__all__ = [
    "RecoveryConfig", "MOMENT_GROUPS", "improvement", "PlateauDetector", "Snapshot", "CheckpointRing",
    "model_state", "load_model_state", "shrink_perturb", "moment_parameters", "reset_moments", "PlateauRecovery",
]

TRUNK_PREFIX = "trunk."  # BranchingNetwork's shared layers; every other network parameter is a head's
_MODEL_PARTS = ("network", "target", "spectral", "popart")  # the learner's modules a checkpoint of the ring holds


def improvement(metric: str, candidate: float, reference: float) -> float:
    """How much ``candidate`` beats ``reference`` on ``metric``, positive when better (lower drawdown is better)."""
    return reference - candidate if metric == "max_drawdown" else candidate - reference


class PlateauDetector:
    """Stale epochs since the last gain of at least ``min_delta`` over the best score; a plateau at ``patience``."""

    def __init__(self, metric: str, patience: int, min_delta: float) -> None:
        self.metric, self.patience, self.min_delta = metric, patience, min_delta
        self.best: float | None = None
        self.stale = 0

    def observe(self, score: float) -> bool:
        """Count one epoch's score; whether the fold is now on a plateau."""
        if math.isfinite(score) and (self.best is None or improvement(self.metric, score, self.best) >= self.min_delta):
            self.best, self.stale = score, 0
        else:
            self.stale += 1
        return self.stale >= self.patience

    def restart(self) -> None:
        """After a recovery: the count starts again (the best score stays the bar to beat)."""
        self.stale = 0


@attrs.frozen
class Snapshot:
    """One checkpoint of the ring: its epoch, score, improvement rate (None: unknown) and model state copies."""

    epoch: int
    score: float
    rate: float | None
    state: dict[str, dict[str, torch.Tensor]] = attrs.field(repr=False)

    def rank(self) -> tuple[bool, float, int]:
        return (self.rate is not None, self.rate if self.rate is not None else 0.0, self.epoch)


class CheckpointRing:
    """The last ``size`` snapshots of the fold; :meth:`best` is the one of the highest improvement rate."""

    def __init__(self, size: int) -> None:
        self.snapshots: collections.deque[Snapshot] = collections.deque(maxlen=size)

    def push(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot)

    def clear(self) -> None:
        self.snapshots.clear()

    def best(self) -> Snapshot:
        if not self.snapshots:
            raise ValueError("the checkpoint ring is empty: push the epoch's snapshot before asking for the best")
        return max(self.snapshots, key=Snapshot.rank)

    def __len__(self) -> int:
        return len(self.snapshots)


def _combiner(learner: Learner) -> dict[str, torch.Tensor]:
    return {"parameters": learner.combiner_parameters} if learner.combiner.parameters_per_component else {}


def _live_parts(learner: Learner) -> dict[str, dict[str, torch.Tensor]]:
    parts = {part: getattr(learner, part).state_dict(keep_vars=True) for part in _MODEL_PARTS}
    return {**parts, "combiner": _combiner(learner)}


def model_state(learner: Learner) -> dict[str, dict[str, torch.Tensor]]:
    """Copies of the learner's model state (networks, spectral vectors, PopArt, combiner values); no replay."""
    return {part: {name: t.detach().clone() for name, t in tensors.items()} for part, tensors in _live_parts(learner).items()}


@torch.no_grad()
def load_model_state(learner: Learner, state: dict[str, dict[str, torch.Tensor]]) -> None:
    """Copy :func:`model_state` output back into the live tensors, in place (captured graphs keep their addresses)."""
    for part, tensors in _live_parts(learner).items():
        for name, tensor in tensors.items():
            tensor.detach().copy_(state[part][name])


@torch.no_grad()
def shrink_perturb(parameters: Iterable[torch.Tensor], shrink: float, noise: float, generator: torch.Generator) -> None:
    """``w ← shrink·w + noise·ξ``, ``ξ ~ N(0, 1)`` drawn from ``generator``, parameter by parameter in order."""
    for parameter in parameters:
        draw = torch.randn(parameter.shape, generator=generator, device=parameter.device, dtype=parameter.dtype)
        parameter.mul_(shrink).add_(draw, alpha=noise)


def moment_parameters(learner: Learner, groups: Sequence[str]) -> dict[str, torch.Tensor]:
    """The optimised parameters of ``groups`` by name (``trunk``, ``heads``, ``all``; see :data:`MOMENT_GROUPS`)."""
    named = dict(learner.network.named_parameters())
    chosen: dict[str, torch.Tensor] = {}
    for group in groups:
        if group == "all":
            chosen.update(named)
            chosen.update({f"combiner.{k}": v for k, v in _combiner(learner).items()})
        elif group == "trunk":
            chosen.update({k: v for k, v in named.items() if k.startswith(TRUNK_PREFIX)})
        elif group == "heads":
            chosen.update({k: v for k, v in named.items() if not k.startswith(TRUNK_PREFIX)})
        else:
            raise ValueError(f"unknown parameter group {group!r}; choose from {list(MOMENT_GROUPS)}")
    return chosen


@torch.no_grad()
def reset_moments(optimizer: torch.optim.Optimizer, parameters: Iterable[torch.Tensor]) -> None:
    """Zero the Adam moments and step count of ``parameters`` only, in place (their bias correction restarts)."""
    for parameter in parameters:
        for tensor in optimizer.state[parameter].values():
            tensor.zero_()


class PlateauRecovery:
    """The per-fold ring, detector and recovery of one run (module docstring); the trainer calls it per epoch.

    ``epsilon_boost`` (0-d, added to ε) and ``temperature_scale`` (0-d, multiplies the Boltzmann temperature)
    are the device tensors the trainer's exploration reads; they hold 0 and 1 except during a boost.
    """

    def __init__(self, config: RecoveryConfig, metric: str, learner: Learner) -> None:
        self.config, self.metric, self.learner = config, metric, learner
        self.ring = CheckpointRing(config.ring_size)
        self.detector = PlateauDetector(metric, config.patience, config.min_delta)
        device = learner.device
        self.epsilon_boost = torch.zeros((), dtype=torch.float32, device=device)
        self.temperature_scale = torch.ones((), dtype=torch.float32, device=device)
        self.used = 0
        self.previous: float | None = None
        self.boost_left = 0
        self.fired_at: int | None = None

    # -- what the trainer's exploration reads ------------------------------------------
    def epsilon(self, epsilon: torch.Tensor) -> torch.Tensor:
        """ε per branch with the boost added, capped at 1."""
        return torch.clamp(epsilon + self.epsilon_boost, max=1.0)

    def temperature(self, temperature: float) -> torch.Tensor:
        return temperature * self.temperature_scale

    # -- the fold and its epochs -------------------------------------------------------
    def start_fold(self) -> None:
        """Fold boundary: an empty ring, no stale epochs, no recovery used, no boost."""
        self.ring.clear()
        self.detector = PlateauDetector(self.metric, self.config.patience, self.config.min_delta)
        self.used, self.previous, self.boost_left, self.fired_at = 0, None, 0, None
        self._boost(False)

    def observe(self, epoch: int, score: float) -> dict[str, Any]:
        """One epoch's end: the boost counts down, the epoch's snapshot joins the ring, the detector counts.

        Returns the epoch's record; ``pending`` says a recovery is due (the trainer then calls :meth:`recover`).
        """
        if self.boost_left:
            self.boost_left -= 1
            if not self.boost_left:
                self._boost(False)
        rate = improvement(self.metric, score, self.previous) if self.previous is not None and math.isfinite(score) else None
        self.ring.push(Snapshot(epoch, score, rate, model_state(self.learner)))
        self.previous = score if math.isfinite(score) else None
        plateau = self.detector.observe(score)
        pending = plateau and self.used < self.config.max_recoveries
        record: dict[str, Any] = {"fired": False, "plateau": plateau, "stale_epochs": self.detector.stale,
                                  "improvement_rate": rate, "used": self.used, "pending": pending}
        if plateau and not pending:
            record["skipped"] = f"max_recoveries ({self.config.max_recoveries}) reached in this fold"
        return record

    def recover(self, epoch: int) -> dict[str, Any]:
        """Rewind, shrink and perturb, reset the chosen moments, start the boost; the record of what was done."""
        c, learner = self.config, self.learner
        target = self.ring.best()
        load_model_state(learner, target.state)
        shrink_perturb(learner.network.parameters(), c.shrink, c.noise, learner.generator)
        learner.spectral.project()
        reset = moment_parameters(learner, c.reset_moments)
        reset_moments(learner.optimizer, reset.values())
        self.used += 1
        self.boost_left, self.fired_at = c.boost_epochs, epoch
        self.previous = target.score if math.isfinite(target.score) else None  # the next rate is from where it resumes
        self.detector.restart()
        self._boost(True)
        return {
            "fired": True, "epoch": epoch, "rewound_to": target.epoch, "rewound_score": target.score,
            "rewound_rate": target.rate, "ring": [s.epoch for s in self.ring.snapshots], "number": self.used, "used": self.used,
            "max_recoveries": c.max_recoveries, "shrink": c.shrink, "noise": c.noise,
            "epsilon_boost": c.epsilon_boost, "temperature_multiplier": c.temperature_multiplier,
            "lr_multiplier": c.lr_multiplier, "boost_epochs": c.boost_epochs,
            "reset_moments": list(c.reset_moments), "reset_parameters": len(reset),
        }

    def _boost(self, on: bool) -> None:
        c = self.config
        self.epsilon_boost.fill_(c.epsilon_boost if on else 0.0)
        self.temperature_scale.fill_(c.temperature_multiplier if on else 1.0)
        self.learner.schedule.set_scale(c.lr_multiplier if on else 1.0)

    # -- resume --------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The counters for the resume checkpoint's metadata (JSON); the ring is left out (module docstring)."""
        return {"used": self.used, "stale_epochs": self.detector.stale, "best": self.detector.best,
                "previous": self.previous, "boost_left": self.boost_left, "fired_at": self.fired_at}

    def load_state(self, state: dict[str, Any]) -> None:
        """Counters of :meth:`state` back, and the boost on again when it had epochs left; the ring starts empty."""
        self.ring.clear()
        self.used, self.detector.stale, self.detector.best = int(state["used"]), int(state["stale_epochs"]), state["best"]
        self.previous, self.boost_left, self.fired_at = state["previous"], int(state["boost_left"]), state["fired_at"]
        self._boost(self.boost_left > 0)
