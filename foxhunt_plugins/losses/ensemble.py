"""Ensemble: negative-correlation learning across the K value heads (Liu & Yao 1999).

Each head regresses the shared expected target ``y`` and is rewarded for
disagreeing with the ensemble mean ``Q̄``::

    L = mean_k [ ½ (Q_k - y)² - λ · ½ (Q_k - Q̄)² ]  =  ½ (Q̄ - y)² + (1 - λ) · ½ Var_k(Q)

so for ``λ = diversity < 1`` (``[plugins.ensemble] diversity``) the loss is
bounded below by 0: the diversity term spreads the heads (their spread is the
epistemic-uncertainty signal) without being able to run away.

``[plugins.ensemble] bootstrap = p < 1`` spreads them the other way, by data
(the masks of bootstrapped DQN, Osband et al. 2016): head ``k`` learns only from
the replay slots its mask lets in, a share ``p`` of them, each (slot, head) pair
in or out by a fixed hash of the slot, so a head sees the same share of the
replay at every update. The loss is then ``mean_k m_k · ½ (Q_k - y)² / p``; it
needs ``diversity = 0`` (the diversity term is bounded below only when every
head fits every sample).
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
import torch

from foxhunt import LossComponent, LossInputs, Registrar, hookimpl

__all__ = ["NAME", "DEFAULT_BUDGET", "EnsembleSettings", "bootstrap_mask", "ensemble_loss", "foxhunt_declare",
           "foxhunt_loss_components"]

NAME = "ensemble"
DEFAULT_BUDGET = 0.15  # the five built-in defaults sum to 1 (see foxhunt_plugins.losses)
DIVERSITY = 0.5


def _bootstrap_with_diversity(instance: EnsembleSettings, attribute: attrs.Attribute, value: float) -> None:
    if value < 1.0 and instance.diversity > 0.0:
        raise ValueError(f"bootstrap = {value} trains each head on its own share of the replay, "
                         f"which is what spreads the heads; set diversity = 0 with it (it is {instance.diversity}: "
                         "the diversity term is bounded below only when every head fits every sample)")


@attrs.frozen
class EnsembleSettings:
    """``[plugins.ensemble]``: λ, the weight of the diversity term (below 1 so the loss stays bounded below), and
    the share of replay slots each head learns from (1: every slot, no bootstrap)."""

    diversity: float = attrs.field(default=DIVERSITY, validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)])
    bootstrap: float = attrs.field(default=1.0, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0),
                                                           _bootstrap_with_diversity])


_MASK_BITS = 16  # a mask draw is the hash's low 16 bits against share · 2^16


def bootstrap_mask(indices: torch.Tensor, heads: int, share: float) -> torch.Tensor:
    """``[B, K]`` float: 1 where head ``k`` learns from replay slot ``indices[b]``, else 0.

    A fixed function of the slot (an integer hash of slot and head, kept under 2^63 so it never overflows), so
    every update agrees on which heads a slot trains, and about ``share`` of the slots train each head."""
    slot = indices.to(torch.int64)[:, None] & 0xFFFFFFFF
    head = torch.arange(1, heads + 1, dtype=torch.int64, device=indices.device)[None, :]
    h = ((slot * 0x9E3779B1) & 0xFFFFFFFF) ^ (head * 0x85EBCA77 & 0xFFFFFFFF)
    h = ((h ^ (h >> 15)) * 0x2C1B3C6D) & 0xFFFFFFFF
    h = h ^ (h >> 13)
    return ((h & ((1 << _MASK_BITS) - 1)) < int(share * (1 << _MASK_BITS))).to(torch.float32)


def ensemble_loss(inputs: LossInputs, diversity: float = DIVERSITY, bootstrap: float = 1.0) -> torch.Tensor:
    heads = inputs.online.ensemble.transpose(0, 1)  # [B, K, Branch, A]
    q = inputs.taken(heads, action_dim=3)  # [B, K, Branch]
    fit = 0.5 * (q - inputs.target_q[:, None, :]) ** 2
    if bootstrap < 1.0:  # a constant of the run; diversity is 0 here (the settings refuse both)
        mask = bootstrap_mask(inputs.batch.indices, q.shape[1], bootstrap).to(q.dtype)
        per_branch = (fit * mask[:, :, None]).mean(1) / bootstrap
        return inputs.batch_mean(inputs.branch_mean(per_branch))
    spread = 0.5 * (q - q.mean(1, keepdim=True)) ** 2
    per_branch = (fit - diversity * spread).mean(1)  # [B, Branch]
    return inputs.batch_mean(inputs.branch_mean(per_branch))


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(EnsembleSettings)


@hookimpl
def foxhunt_loss_components(config: Any, settings: EnsembleSettings) -> list[LossComponent]:
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(ensemble_loss, diversity=settings.diversity, bootstrap=settings.bootstrap),
            description="ensemble value heads: TD fit with a negative-correlation diversity term",
        )
    ]
