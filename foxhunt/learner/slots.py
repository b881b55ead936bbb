"""The ISV slots the learner reads, and their fallbacks when no plugin declares them.

The learner never writes the ISV: adaptive kernels own these slots (they
declare them and write them); the learner only reads them through live views,
so a kernel's write is seen by the next update with no copy and no host sync.
When a slot is absent from the layout the learner uses a constant device
tensor made once from :class:`~foxhunt.learner.config.LearnerConfig` (or, for
slots no learner setting stands for, a constant of this module).
"""

from __future__ import annotations

import attrs
import torch

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.contract import (CQL_ALPHA, CQL_ALPHA_FALLBACK, GAMMA, GRAD_BALANCE, HEALTH, SARSA_TEMPERATURE,
                              SARSA_TEMPERATURE_FALLBACK, SUPPORT_CENTER, SUPPORT_HALF_WIDTH, SUPPORT_KNOTS, TAU)
from foxhunt.errors import LayoutError
from foxhunt.isv import ISV
from foxhunt.learner.config import LearnerConfig

__all__ = [
    "SUPPORT_CENTER",
    "SUPPORT_HALF_WIDTH",
    "SUPPORT_KNOTS",
    "TAU",
    "GAMMA",
    "HEALTH",
    "CQL_ALPHA",
    "CQL_ALPHA_FALLBACK",
    "GRAD_BALANCE",
    "SARSA_TEMPERATURE",
    "SLOT_WIDTHS",
    "LearnerReads",
    "read_slot",
]


N_BRANCHES = len(Branch)
# The widths the learner reads them at: the contract's, which their owners declare.
SLOT_WIDTHS: dict[str, int] = {
    name: contract.by_name(name).width
    for name in (SUPPORT_CENTER, SUPPORT_HALF_WIDTH, SUPPORT_KNOTS, TAU, GAMMA, HEALTH, CQL_ALPHA, GRAD_BALANCE,
                 SARSA_TEMPERATURE)
}


def read_slot(isv: ISV, name: str) -> torch.Tensor | None:
    """A live view of slot ``name`` when the layout has it (width checked), else ``None``."""
    if name not in isv.layout.offsets:
        return None
    expected = SLOT_WIDTHS.get(name)
    width = isv.layout.width(name)
    if expected is not None and width != expected:
        owner = isv.layout.slot(name).owner
        raise LayoutError(
            f"ISV slot {name!r} (declared by {owner!r}) has width {width}, but the learner reads it as width "
            f"{expected}; declare it with registrar.slot({name!r}, width={expected})"
        )
    return isv.view(name)


@attrs.frozen
class LearnerReads:
    """Live tensors the update reads each step: ISV views, or constant fallbacks.

    Shapes: ``center``, ``half_width``, ``gamma``, ``grad_balance``, ``sarsa_temperature`` are ``[Branch]``;
    ``tau``, ``health``, ``cql_alpha`` are ``[1]``. ``knots`` is the ``support.knots`` view ``[Branch × AtomKnot]``
    (the quantile atom spacing's; :mod:`foxhunt.learner.atoms`), or ``None`` when no plugin declares it: it has
    no fallback, since an even spacing needs none. ``sources`` says, per slot
    name, whether it comes from the ISV or is a fallback (``"config"``; for
    ``foxhunt plugins inspect`` and the docs).
    """

    center: torch.Tensor
    half_width: torch.Tensor
    tau: torch.Tensor
    gamma: torch.Tensor
    health: torch.Tensor
    cql_alpha: torch.Tensor
    grad_balance: torch.Tensor
    sarsa_temperature: torch.Tensor
    sources: dict[str, str]
    knots: torch.Tensor | None = None

    @classmethod
    def build(cls, isv: ISV, config: LearnerConfig) -> LearnerReads:
        device = isv.tensor.device
        fallbacks = {
            SUPPORT_CENTER: [0.5 * (config.v_min + config.v_max)] * N_BRANCHES,
            SUPPORT_HALF_WIDTH: [0.5 * (config.v_max - config.v_min)] * N_BRANCHES,
            TAU: [config.tau],
            GAMMA: [config.gamma] * N_BRANCHES,
            HEALTH: [1.0],
            CQL_ALPHA: [CQL_ALPHA_FALLBACK],
            GRAD_BALANCE: [1.0] * N_BRANCHES,
            SARSA_TEMPERATURE: [SARSA_TEMPERATURE_FALLBACK] * N_BRANCHES,
        }
        tensors: dict[str, torch.Tensor] = {}
        sources: dict[str, str] = {}
        for name, fallback in fallbacks.items():
            view = read_slot(isv, name)
            if view is None:
                tensors[name] = torch.tensor(fallback, dtype=torch.float32, device=device)
                sources[name] = "config"
            else:
                tensors[name] = view
                sources[name] = "isv"
        return cls(
            center=tensors[SUPPORT_CENTER],
            half_width=tensors[SUPPORT_HALF_WIDTH],
            tau=tensors[TAU],
            gamma=tensors[GAMMA],
            health=tensors[HEALTH],
            cql_alpha=tensors[CQL_ALPHA],
            grad_balance=tensors[GRAD_BALANCE],
            sources=sources,
            sarsa_temperature=tensors[SARSA_TEMPERATURE],
            knots=read_slot(isv, SUPPORT_KNOTS),
        )
