"""Multi-quantile head: fixed-level quantiles (5/25/50/75/95 by default) of every (branch, action)'s return.

Off by default (``[plugins.quantiles] enabled = false``): a run that switches it on gives it a share of the others'
budgets in ``[learner.budgets]`` (docs/learner.md, "Multi-quantile head").

**The head.** The component asks the learner, through its record's :class:`~foxhunt.AuxiliaryTask`, for
``Branch × A × L`` columns of the auxiliary head on the trunk (A the largest branch's action count, L the number
of ``levels``), read as ``θ [B, Branch, A, L]``: ``θ_b,a,l(s)`` is the ``levels[l]``-quantile of the n-step
return of action ``a`` of branch ``b`` at ``s``, in PopArt-normalised units. It asks for no future returns
(``horizon = 0``): its targets are the learner's own.

**The loss.** For each branch, the L quantiles of the *taken* action are regressed by quantile-Huber (reusing
:func:`foxhunt.learner.quantile_huber`, Dabney et al. 2018) onto the T' target samples the IQN component uses,
``LossInputs.target_quantiles = r + γ^m θ'(τ')`` (the target IQN head at the next state's double-DQN action)::

    ρ_τ(δ) = |τ − 1(δ < 0)| · Huber_κ(δ) / κ,    δ_lj = y_j − θ_b,a_b,l(s)
    L_b    = Σ_l mean_j ρ_{levels[l]}(δ_lj)
    loss   = w · mean_batch( w_IS · mean_branch( g_b · L_b ) )

``w`` is the ISV slot ``quantiles.weight`` (from ``[plugins.quantiles] weight``), ``w_IS`` the replay's importance
weights and ``g_b`` ``grad_balance.scale`` normalised to mean 1, as for every loss. Only the taken action's columns
are gathered, so a padded action's column (past its branch's real actions) never reaches the loss and gets exactly
zero gradient.

Why a fixed-level head beside IQN: IQN samples new fractions every update, so the trunk learns a τ-conditioned
quantile function whose tails are each seen rarely. Fixed levels ask the same five questions every update,
including the 5% and 95% tails of every action's return: the trunk must carry features for downside and upside
risk, not only for the mean the C51 and MSE heads need. The levels are read only as the loss's τ (no buffer is
indexed by a level), so a run may choose any strictly increasing levels in (0, 1).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import attrs
import torch

from foxhunt import AuxiliaryTask, Branch, LossComponent, LossInputs, Registrar, ResetCategory, hookimpl
from foxhunt.actions import branch_sizes
from foxhunt.contract import QUANTILES_WEIGHT
from foxhunt.learner import quantile_huber

__all__ = ["NAME", "DEFAULT_BUDGET", "WEIGHT", "LEVELS", "KAPPA", "QuantileSettings", "head_width",
           "quantile_head", "quantile_per_branch", "quantile_loss", "foxhunt_declare", "foxhunt_loss_components"]

NAME = "quantiles"  # the component's and the plugin's name: [learner.budgets] key and metrics.jsonl's loss.<name>
# Opt-in: the five built-in defaults already sum to 1, so a run that enables it moves budget to it in
# [learner.budgets] (e.g. c51 0.35, quantiles 0.05).
DEFAULT_BUDGET = 0.05
WEIGHT = QUANTILES_WEIGHT  # ISV [1]: the loss's weight before its gradient budget
LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)
KAPPA = 1.0


def _levels(instance: object, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    inside = numbers and all(0.0 < v < 1.0 for v in value)
    increasing = inside and all(low < high for low, high in zip(value, value[1:], strict=False))
    if not value or not increasing:
        raise ValueError(f"'{attribute.name}' must be at least one quantile level, each in (0, 1), strictly "
                         f"increasing: {list(value)!r}")


def _positive_finite(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number > 0: {value!r}")


def _weight(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number >= 0: {value!r}")


@attrs.frozen
class QuantileSettings:
    """``[plugins.quantiles]``: the switch, the quantile levels, the Huber threshold κ (PopArt-normalised return
    units, as ``[plugins.iqn] kappa``) and the loss weight written into ``quantiles.weight``."""

    enabled: bool = False
    levels: tuple[float, ...] = attrs.field(default=LEVELS, converter=tuple, validator=_levels)
    kappa: float = attrs.field(default=KAPPA, validator=_positive_finite)
    weight: float = attrs.field(default=1.0, validator=_weight)


def head_width(levels: int) -> int:
    """The head's columns: ``Branch × A × L`` (A the largest branch's actions: the learner pads to it)."""
    return len(Branch) * max(branch_sizes()) * levels


_BRANCHES = len(Branch)  # a Python int taken at import: the loss runs inside the compiled update


def quantile_head(inputs: LossInputs, levels: int) -> torch.Tensor:
    """This component's head columns as ``θ [B, Branch, A, L]`` (A from the action mask, padded actions included)."""
    actions = inputs.action_mask.shape[-1]
    return inputs.auxiliary(NAME).unflatten(-1, (_BRANCHES, actions, levels))


def quantile_per_branch(inputs: LossInputs, levels: tuple[float, ...], kappa: float = KAPPA) -> torch.Tensor:
    """Quantile-Huber loss ``[B, Branch]`` of the taken action's L quantiles against the target IQN samples."""
    pred = inputs.taken(quantile_head(inputs, len(levels)))  # [B, Branch, L]: padded actions never gathered
    # the levels as fills, not a tensor built from a list: no host-to-device copy inside a captured update
    taus = torch.cat([torch.full_like(pred[..., :1], level) for level in levels], dim=-1)
    return quantile_huber(pred, inputs.target_quantiles, taus, kappa)


def quantile_loss(inputs: LossInputs, levels: tuple[float, ...], kappa: float = KAPPA) -> torch.Tensor:
    per_sample = inputs.branch_mean(quantile_per_branch(inputs, levels, kappa))
    return inputs.slot(WEIGHT)[0] * inputs.batch_mean(per_sample)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    settings = registrar.settings(QuantileSettings)
    settings = QuantileSettings() if settings is None else settings
    # Declared on or off: a layout depends on the code alone, so switching the head on never changes a run's
    # fingerprint. Off, nothing reads it and it costs one float.
    registrar.slot(WEIGHT, init=settings.weight, doc="loss weight of the fixed-level quantile head")
    registrar.state(WEIGHT, ResetCategory.TRAINING_PERSIST, doc="[plugins.quantiles] weight, kept for the run")


@hookimpl
def foxhunt_loss_components(config: Any, settings: QuantileSettings) -> list[LossComponent]:
    if not settings.enabled:
        return []
    levels = tuple(float(level) for level in settings.levels)
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(quantile_loss, levels=levels, kappa=settings.kappa),
            description=f"multi-quantile head: the taken action's quantiles at levels {list(levels)} per branch, "
                        "quantile-Huber against the target IQN samples",
            reads=(WEIGHT,),
            auxiliary=AuxiliaryTask(outputs=head_width(len(levels)), horizon=0),
        )
    ]
