"""Auxiliary tasks: the trunk also learns to predict the market, next bar and the coming few.

Off by default (``[plugins.auxiliary] enabled = false``): a run that switches it on gives its components a
share of the others' budgets in ``[learner.budgets]`` (docs/learner.md, "Auxiliary tasks", has the measured
effect and the lines to use).

Two loss components, each asking the learner for columns of one auxiliary head on the trunk and for the
market's standardised next log-returns (:class:`~foxhunt.AuxiliaryTask`; the core's part is
:mod:`foxhunt.learner.auxiliary`):

- ``aux_return``: the next bar's return, by squared error::

      L = w_return · mean_i  valid_i · ½ (ŷ_i − r_i,1)²

  ``r_i,1`` is the log-return of the bar after the sample's, in units of the fold's typical one-bar move.
- ``aux_regime``: the coming ``regime_bars`` bars' regime, by cross-entropy over three classes of the
  standardised sum ``s_i = Σ_{h ≤ H} r_i,h / √H``: DOWN below ``−regime_threshold``, UP above
  ``+regime_threshold``, FLAT between. At the default 0.43 the three classes are equally likely for
  independent Gaussian returns (Φ(0.43) ≈ 2/3)::

      L = w_regime · mean_i  valid_i · CE(logits_i, class(s_i))

Both are importance-weighted (prioritized replay's correction) and skip the samples whose target reaches past
the fold's training window (``valid = 0``). The weights ``w`` are read from the ISV slot
``auxiliary.return_weight`` and ``auxiliary.regime_weight`` (from ``return_weight``/``regime_weight``): a weight scales the loss before its
gradient is clipped to the component's budget, so it sets how hard the task pulls up to that budget.

Why they help a Q-network: the trunk every value head reads is trained by the TD targets alone, whose
signal-to-noise is low on a market whose edge is a small conditional mean. Predicting the next return is the
same conditional mean asked directly, so the trunk's features come to encode it (Jaderberg et al. 2016,
"Reinforcement Learning with Unsupervised Auxiliary Tasks", for the general idea).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import attrs
import torch
from torch.nn import functional as F

from foxhunt import AuxiliaryTask, DimTable, LossComponent, LossInputs, Registrar, ResetCategory, auto, hookimpl
from foxhunt.contract import AUXILIARY_REGIME_WEIGHT, AUXILIARY_RETURN_WEIGHT

__all__ = ["NAME", "RETURN", "REGIME", "DEFAULT_BUDGET", "RETURN_WEIGHT", "REGIME_WEIGHT", "TASKS", "Regime",
           "AuxiliarySettings",
           "return_loss", "regime_labels", "regime_loss", "foxhunt_declare", "foxhunt_loss_components"]

NAME = "auxiliary"
RETURN = "aux_return"  # the components' names: [learner.budgets] keys and metrics.jsonl's loss.<name>
REGIME = "aux_regime"
# Opt-in: the five built-in defaults already sum to 1, so a run that enables it moves budget to it in
# [learner.budgets] (e.g. c51 0.30, aux_return 0.05, aux_regime 0.05).
DEFAULT_BUDGET = 0.05
RETURN_WEIGHT = AUXILIARY_RETURN_WEIGHT  # ISV [1]: the next-bar-return task's loss weight
REGIME_WEIGHT = AUXILIARY_REGIME_WEIGHT  # ISV [1]: the regime task's loss weight
TASKS = ("return", "regime")


class Regime(DimTable):
    """The regime head's classes: columns of its logits ``[B, Regime]``."""

    DOWN = auto()
    FLAT = auto()
    UP = auto()


def _weight(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number >= 0: {value!r}")


def _threshold(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number > 0 (standard deviations): {value!r}")


def _bars(instance: object, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"'{attribute.name}' must be a whole number of bars >= 1: {value!r}")


def _tasks(instance: object, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    unknown = [task for task in value if task not in TASKS]
    if unknown or not value or len(set(value)) != len(value):
        raise ValueError(f"'tasks' must name each of {list(TASKS)} at most once, and at least one: {list(value)!r}")


@attrs.frozen
class AuxiliarySettings:
    """``[plugins.auxiliary]``: the switch, which tasks, their loss weights, and the regime's horizon and bands.

    ``regime_bars``: bars ahead the regime covers; ``regime_threshold``: the band edge of the standardised sum
    of those bars' returns, in standard deviations (0.43: three equally likely classes for Gaussian returns).
    """

    enabled: bool = False
    tasks: tuple[str, ...] = attrs.field(default=TASKS, converter=tuple, validator=_tasks)
    return_weight: float = attrs.field(default=1.0, validator=_weight)
    regime_weight: float = attrs.field(default=1.0, validator=_weight)
    regime_bars: int = attrs.field(default=5, validator=_bars)
    regime_threshold: float = attrs.field(default=0.43, validator=_threshold)


def return_loss(inputs: LossInputs) -> torch.Tensor:
    """Squared error of the next bar's standardised return, masked past the training window."""
    prediction = inputs.auxiliary(RETURN)[:, 0]  # [B]
    target = inputs.batch.future_returns[:, 0]
    valid = inputs.batch.future_valid[:, 0]
    error = prediction - target
    return inputs.slot(RETURN_WEIGHT)[0] * inputs.batch_mean(0.5 * valid * error * error)


def regime_labels(future_returns: torch.Tensor, future_valid: torch.Tensor, bars: int,
                  threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(classes [B] int64 of Regime, known [B] float)`` from the first ``bars`` standardised returns."""
    total = future_returns[:, :bars].sum(-1) / math.sqrt(bars)
    classes = (total > -threshold).to(torch.int64) + (total > threshold).to(torch.int64)
    return classes, future_valid[:, :bars].prod(-1)


def regime_loss(inputs: LossInputs, bars: int, threshold: float) -> torch.Tensor:
    """Cross-entropy of the coming ``bars`` bars' regime, masked where they reach past the training window."""
    logits = inputs.auxiliary(REGIME)  # [B, Regime]
    classes, known = regime_labels(inputs.batch.future_returns, inputs.batch.future_valid, bars, threshold)
    per_sample = F.cross_entropy(logits, classes, reduction="none")
    return inputs.slot(REGIME_WEIGHT)[0] * inputs.batch_mean(known * per_sample)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    settings = registrar.settings(AuxiliarySettings)
    settings = AuxiliarySettings() if settings is None else settings
    # Declared on or off: a layout depends on the code alone, so switching the tasks on never changes a run's
    # fingerprint. Off, nothing reads them and they cost two floats.
    registrar.slot(RETURN_WEIGHT, init=settings.return_weight, doc="loss weight of the next-bar-return task")
    registrar.state(RETURN_WEIGHT, ResetCategory.TRAINING_PERSIST,
                    doc="[plugins.auxiliary] return_weight, kept for the run")
    registrar.slot(REGIME_WEIGHT, init=settings.regime_weight, doc="loss weight of the regime task")
    registrar.state(REGIME_WEIGHT, ResetCategory.TRAINING_PERSIST,
                    doc="[plugins.auxiliary] regime_weight, kept for the run")
    registrar.dims(Regime)


@hookimpl
def foxhunt_loss_components(config: Any, settings: AuxiliarySettings) -> list[LossComponent]:
    if not settings.enabled:
        return []
    components = []
    if "return" in settings.tasks:
        components.append(LossComponent(
            name=RETURN,
            budget=DEFAULT_BUDGET,
            loss=return_loss,
            description="auxiliary task: the next bar's standardised log-return, squared error",
            reads=(RETURN_WEIGHT,),
            auxiliary=AuxiliaryTask(outputs=1, horizon=1),
        ))
    if "regime" in settings.tasks:
        components.append(LossComponent(
            name=REGIME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(regime_loss, bars=settings.regime_bars, threshold=settings.regime_threshold),
            description=f"auxiliary task: the regime (down, flat, up) of the next {settings.regime_bars} bars, "
                        "cross-entropy",
            reads=(REGIME_WEIGHT,),
            auxiliary=AuxiliaryTask(outputs=Regime.size(), horizon=settings.regime_bars),
        ))
    return components
