"""CQL: the conservative penalty ``α (logsumexp_a Q(s, a) - Q(s, a_taken))`` per branch (Kumar et al. 2020).

It pushes down the values of actions the data never took, relative to the one
it did. ``logsumexp`` runs over each branch's real actions only (padded actions
have ``Q = -inf``, contributing ``exp(-inf) = 0``). α is the ``cql.alpha`` ISV
slot, which the static plugin writes from ``[plugins.static] cql_alpha``; without
that plugin the learner's constant ``CQL_ALPHA_FALLBACK`` (the same default).
"""

from __future__ import annotations

from typing import Any

import torch

from foxhunt import LossComponent, LossInputs, hookimpl
from foxhunt.contract import CQL_ALPHA

__all__ = ["NAME", "DEFAULT_BUDGET", "cql_loss", "foxhunt_loss_components"]

NAME = "cql"
DEFAULT_BUDGET = 0.10  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)


def cql_loss(inputs: LossInputs) -> torch.Tensor:
    q = inputs.online.q  # [B, Branch, A], padded actions -inf
    gap = torch.logsumexp(q, dim=-1) - inputs.taken(q)  # [B, Branch]
    return inputs.cql_alpha.squeeze(0) * inputs.batch_mean(inputs.branch_mean(gap))


@hookimpl
def foxhunt_loss_components(config: Any) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=cql_loss,
            description="conservative Q penalty: logsumexp over each branch's actions minus the taken action",
            reads=(CQL_ALPHA,),
            optional_reads=(CQL_ALPHA,),  # the learner's CQL_ALPHA_FALLBACK when the static plugin is not loaded
        )
    ]
