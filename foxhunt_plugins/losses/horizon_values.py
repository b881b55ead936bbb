"""Per-branch value decoders, horizon-decomposed: V_short (the next n steps) and V_long (everything) per branch.

Off by default (``[plugins.horizon_values] enabled = false``): a run that switches it on gives it a share of the
others' budgets in ``[learner.budgets]`` (docs/learner.md, "Horizon-decomposed values").

**The head.** The component asks the learner, through its record's :class:`~foxhunt.AuxiliaryTask`, for
``Branch × ValueHorizon`` columns of the auxiliary head on the trunk, read as ``[B, Branch, ValueHorizon]``: two
value decoders per branch, ``V_short(s, b)`` and ``V_long(s, b)``, in PopArt-normalised return units. It asks for
no future returns (``horizon = 0``): its targets are the learner's own.

**What each regresses on**, for the sampled transition's taken action ``a_b`` of each branch ``b``:

- ``V_long(s, b)`` onto ``LossInputs.target_q[:, b]``, the learner's n-step target
  ``(r + γ_b^m E[Z'(s', a*)] − μ_b) / σ_b`` (double DQN's ``a*``, done-masked: ``γ^m = 0`` after a terminal);
- ``V_short(s, b)`` onto ``LossInputs.target_rewards[:, b]``, the n-step discounted reward part of that same
  target alone, ``(r − μ_b) / σ_b`` with ``r = Σ_{k<m} γ_b^k r_{t+k}`` (plus the execution credit when
  ``[learner] execution_regret`` adds it to the target);

both by squared error::

    loss = w · mean_batch( w_IS · mean_branch( g_b · ½ [(V_short − r̂)² + (V_long − ŷ)²] ) )

``w`` is the ISV slot ``horizon_values.weight`` (from ``[plugins.horizon_values] weight``), ``w_IS`` the replay's
importance weights and ``g_b`` ``grad_balance.scale`` normalised to mean 1, as for every loss. Both targets go
through the same PopArt map, so ``σ_b (V_long − V_short)`` estimates ``γ_b^m E[Z']``: the value earned beyond the
n-step horizon. The targets are those of the taken action, so the two are values of the replayed behaviour for
the next n steps followed by the greedy policy (the same quantity the Q heads regress on, averaged over the
replay's actions).

Why: every Q head regresses on ``r + γ^m E[Z']`` as one number, so the trunk is never told which part of a
value is the next few bars' reward, whose signal is the market's short-run drift and the trade's costs, and which
is the bootstrapped tail, slower and as noisy as the target network. Asking the trunk to decode the two apart
makes it keep features for each: a near-horizon reward predictor (close to what the auxiliary next-return task
asks, but in the reward's own units and costs) and a long-horizon value, per branch, so that e.g. the urgency
branch's short-horizon cost and the direction branch's long-horizon value need not share one decoder.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import torch

from foxhunt import (
    AuxiliaryTask,
    Branch,
    DimTable,
    LossComponent,
    LossInputs,
    Registrar,
    ResetCategory,
    auto,
    hookimpl,
)
from foxhunt.contract import HORIZON_VALUES_WEIGHT

__all__ = ["NAME", "DEFAULT_BUDGET", "WEIGHT", "ValueHorizon", "HorizonValueSettings", "value_head",
           "horizon_per_branch", "horizon_loss", "foxhunt_declare", "foxhunt_loss_components"]

NAME = "horizon_values"  # the component and the plugin: [learner.budgets] key and metrics.jsonl's loss.<name>
# Opt-in: the five built-in defaults already sum to 1, so a run that enables it moves budget to it in
# [learner.budgets] (e.g. c51 0.35, horizon_values 0.05).
DEFAULT_BUDGET = 0.05
WEIGHT = HORIZON_VALUES_WEIGHT  # ISV [1]: the loss's weight before its gradient budget


class ValueHorizon(DimTable):
    """The decoders of each branch: columns of the head's values ``[B, Branch, ValueHorizon]``."""

    SHORT = auto()  # V_short: the n-step discounted reward part of the target
    LONG = auto()  # V_long: the whole n-step target r + γ^m E[Z']


def _weight(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number >= 0: {value!r}")


@attrs.frozen
class HorizonValueSettings:
    """``[plugins.horizon_values]``: the switch and the loss weight written into ``horizon_values.weight``."""

    enabled: bool = False
    weight: float = attrs.field(default=1.0, validator=_weight)


# Python ints taken once at import: the loss runs inside the compiled update, where dynamo cannot trace a
# DimTable's size() (it reads the enum's __members__ property)
_BRANCHES = len(Branch)
_HORIZONS = ValueHorizon.size()


def value_head(inputs: LossInputs) -> torch.Tensor:
    """This component's head columns as ``[B, Branch, ValueHorizon]``."""
    return inputs.auxiliary(NAME).unflatten(-1, (_BRANCHES, _HORIZONS))


def horizon_per_branch(inputs: LossInputs) -> torch.Tensor:
    """``½ [(V_short − r̂)² + (V_long − ŷ)²]`` per sample and branch, ``[B, Branch]``."""
    values = value_head(inputs)
    short = values[..., ValueHorizon.SHORT] - inputs.target_rewards
    long = values[..., ValueHorizon.LONG] - inputs.target_q
    return 0.5 * (short * short + long * long)


def horizon_loss(inputs: LossInputs) -> torch.Tensor:
    return inputs.slot(WEIGHT)[0] * inputs.batch_mean(inputs.branch_mean(horizon_per_branch(inputs)))


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    settings = registrar.settings(HorizonValueSettings)
    settings = HorizonValueSettings() if settings is None else settings
    # Declared on or off: a layout depends on the code alone, so switching the decoders on never changes a run's
    # fingerprint. Off, nothing reads it and it costs one float.
    registrar.slot(WEIGHT, init=settings.weight, doc="loss weight of the per-branch V_short/V_long decoders")
    registrar.state(WEIGHT, ResetCategory.TRAINING_PERSIST, doc="[plugins.horizon_values] weight, kept for the run")
    registrar.dims(ValueHorizon)


@hookimpl
def foxhunt_loss_components(config: Any, settings: HorizonValueSettings) -> list[LossComponent]:
    if not settings.enabled:
        return []
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=horizon_loss,
            description="horizon-decomposed values: per-branch V_short on the n-step reward part and V_long on the "
                        "n-step target, squared error",
            reads=(WEIGHT,),
            auxiliary=AuxiliaryTask(outputs=len(Branch) * ValueHorizon.size(), horizon=0),
        )
    ]
