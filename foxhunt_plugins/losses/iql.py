"""IQL value head: a dual-τ expectile state value V(s) per branch, and C51 atoms centred on it, sample by sample.

Off by default (``[plugins.iql] enabled = false``): not yet shown to help, so it
joins a run only when switched on, and the run then re-balances
``[learner.budgets]`` (docs/learner.md, "IQL value head").

**The value head.** The component asks the learner, through its record's
:class:`~foxhunt.CentredSupport`, for a state-value head: one small MLP per
branch on the trunk's output with two outputs, ``V_low(s)`` and ``V_high(s)``
(columns of the :class:`Expectile` table). Each is trained by expectile
regression (Kostrikov, Nair and Levine 2021, "Offline Reinforcement Learning
with Implicit Q-Learning")::

    L_τ(u) = |τ − 1(u < 0)| · u²,   u = Q̂(s, a) − V_τ(s)

at ``τ_low`` and ``τ_high``, summed over the two, averaged over branches
(``grad_balance.scale``) and over the batch (importance weights). ``Q̂(s, a)``
is the *target* network's expected Q of the taken action, as in the paper:
the online network's Q is itself measured on atoms centred on the online
V(s), so regressing V on it would chase its own output within one update;
the target network moves by Polyak averaging only, like every other target
of the learner. The paper's τ < 1 expectile of Q over the data's actions
approaches the best action's value as τ → 1 without querying actions the
data never took; two τ bracket that distribution from below and above.

**The centred support.** Every forward of the update then places sample
``i``'s atoms of branch ``b`` at::

    z_ij = c_i + w_b · linspace(−1, 1)_j,   c_i = (1 − m) V_low(s_i) + m V_high(s_i)
    w_b = max(support.half_width_b, iql.support_floor_b)

with ``m = centre_mix``: the half-width is the support plugin's (or the
learner's fallback), never narrower than the floor this plugin declares in
the ISV (``iql.support_floor``, from ``[plugins.iql] support_floor``). The
C51 projection lands on each sample's own atoms; the target atoms are
``r + γ^m (c'_i + w z)`` with ``c'`` the target network's centre at the
next state. The centre is detached: the atoms are coordinates, which only
the expectile loss moves.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import attrs
import torch

from foxhunt import (
    Branch,
    CentredSupport,
    DimTable,
    LossComponent,
    LossInputs,
    Registrar,
    ResetCategory,
    auto,
    hookimpl,
)
from foxhunt.contract import IQL_SUPPORT_FLOOR

__all__ = ["NAME", "DEFAULT_BUDGET", "SUPPORT_FLOOR", "Expectile", "IqlSettings", "expectile_loss", "iql_per_branch",
           "iql_loss", "value_centre", "foxhunt_declare", "foxhunt_loss_components"]

NAME = "iql"
# Opt-in: the five built-in defaults already sum to 1, so a run that enables it gives it a share of another's
# budget in [learner.budgets] (e.g. c51 0.30, iql 0.10).
DEFAULT_BUDGET = 0.10
SUPPORT_FLOOR = IQL_SUPPORT_FLOOR  # ISV [Branch]: the minimum half-width of the centred atoms


class Expectile(DimTable):
    """Columns of the state-value head's output ``[B, Branch, Expectile]``."""

    LOW = auto()  # V at τ_low
    HIGH = auto()  # V at τ_high


def _fraction(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise ValueError(f"'{attribute.name}' must be an expectile in (0, 1): {value!r}")


def _positive_finite(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number > 0: {value!r}")


@attrs.frozen
class IqlSettings:
    """``[plugins.iql]``: the switch, the two expectiles, where the atoms centre, and their minimum half-width.

    ``support_floor`` is in PopArt-normalised return units (the support's own), ``centre_mix`` the weight of
    ``V_high`` in the centre (0: ``V_low``, 1: ``V_high``).
    """

    enabled: bool = False
    tau_low: float = attrs.field(default=0.3, validator=_fraction)
    tau_high: float = attrs.field(default=0.7, validator=_fraction)
    support_floor: float = attrs.field(default=1.0, validator=_positive_finite)
    centre_mix: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)])

    def __attrs_post_init__(self) -> None:
        if not self.tau_low < self.tau_high:
            raise ValueError(f"tau_low ({self.tau_low}) must be below tau_high ({self.tau_high})")


def expectile_loss(u: torch.Tensor, tau: float) -> torch.Tensor:
    """Elementwise ``|τ − 1(u < 0)| · u²`` (the indicator carries no gradient)."""
    return (tau - (u.detach() < 0).to(u.dtype)).abs() * u * u


def iql_per_branch(inputs: LossInputs, tau_low: float, tau_high: float) -> torch.Tensor:
    """Expectile regression of ``V_low`` and ``V_high`` on the target network's ``Q(s, a)``, summed: ``[B, Branch]``."""
    values = inputs.online.state_values  # [B, Branch, Expectile]
    target = inputs.target_taken_q  # [B, Branch]
    low = expectile_loss(target - values[..., Expectile.LOW], tau_low)
    high = expectile_loss(target - values[..., Expectile.HIGH], tau_high)
    return low + high


def iql_loss(inputs: LossInputs, tau_low: float, tau_high: float) -> torch.Tensor:
    return inputs.batch_mean(inputs.branch_mean(iql_per_branch(inputs, tau_low, tau_high)))


def value_centre(state_values: torch.Tensor, centre_mix: float) -> torch.Tensor:
    """The atoms' centre per sample and branch: ``(1 − m) V_low + m V_high``, ``[B, Branch]``."""
    return (1.0 - centre_mix) * state_values[..., Expectile.LOW] + centre_mix * state_values[..., Expectile.HIGH]


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    settings = registrar.settings(IqlSettings)
    # Declared whether or not the plugin is on: a layout depends on the code alone (the conformance kit checks
    # it), so switching IQL on never changes a run's fingerprint. Off, nothing reads it and it costs 4 floats.
    floor = IqlSettings().support_floor if settings is None else settings.support_floor
    registrar.slot(SUPPORT_FLOOR, width=len(Branch), init=floor,
                   doc="minimum half-width of the C51 atoms centred on V(s) [Branch] (normalised return units)")
    registrar.state(SUPPORT_FLOOR, ResetCategory.TRAINING_PERSIST,
                    doc="[plugins.iql] support_floor, kept for the run like the support it bounds")


@hookimpl
def foxhunt_loss_components(config: Any, settings: IqlSettings) -> list[LossComponent]:
    if not settings.enabled:
        return []
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(iql_loss, tau_low=settings.tau_low, tau_high=settings.tau_high),
            description="IQL value head: dual-τ expectile regression of V(s) on the target Q(s, a); C51 atoms "
                        "centred on V(s) per sample",
            reads=(SUPPORT_FLOOR,),
            centred_support=CentredSupport(
                outputs=Expectile.size(),
                centre=functools.partial(value_centre, centre_mix=settings.centre_mix),
                floor=SUPPORT_FLOOR,
            ),
        )
    ]
