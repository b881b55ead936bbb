"""Optimisation pieces: AdamW with a device learning rate, cosine warm restarts, Polyak averaging.

The learning rate lives in a device tensor that the optimiser reads at every
step and the schedule rewrites on the device, so no Python float changes
between updates. On CUDA the optimiser is ``capturable`` (its step counter is a
device tensor too, so a CUDA graph can hold the whole update) and ``fused``
(the per-parameter foreach path cost ~2 ms per update at the default network
on an H200); on the CPU, where torch does not support ``capturable``, it runs
the single-tensor path, which is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from foxhunt.learner.config import LearnerConfig

__all__ = ["make_optimizer", "reset_optimizer", "LRSchedule", "polyak_update"]


def make_optimizer(params: Sequence[torch.nn.Parameter], config: LearnerConfig, lr: torch.Tensor,
                   decayed: Sequence[torch.nn.Parameter] | None = None) -> torch.optim.AdamW:
    """AdamW (decoupled weight decay) reading ``lr`` (a device tensor) each step, state allocated up front.
    ``decayed``: the parameters ``config.weight_decay`` applies to, the others none (two parameter groups);
    ``None`` decays all of ``params`` (one group)."""
    cuda = params[0].device.type == "cuda"
    groups: Sequence[Any] = params
    if decayed is not None:
        chosen = {id(p) for p in decayed}
        if not chosen <= {id(p) for p in params}:
            raise ValueError("make_optimizer: a parameter to decay is not among the optimised parameters")
        groups = [{"params": [p for p in params if id(p) in chosen]},
                  {"params": [p for p in params if id(p) not in chosen], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(
        groups, lr=lr, betas=tuple(config.adam_betas), eps=config.adam_eps, weight_decay=config.weight_decay,
        capturable=cuda, fused=cuda or None,  # fused: a few kernels for all parameters, not a few per parameter
    )
    for p in params:
        # allocated now rather than lazily at the first step: checkpoints have a fixed set of
        # tensors, and the first captured step does not allocate
        step_device = p.device if cuda else torch.device("cpu")
        optimizer.state[p] = {
            "step": torch.zeros((), dtype=torch.float32, device=step_device),
            "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
            "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
        }
    return optimizer


@torch.no_grad()
def reset_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """Fold boundary: zero the moments and the step count, in place (bias correction restarts)."""
    for state in optimizer.state.values():
        for tensor in state.values():
            tensor.zero_()


class LRSchedule:
    """Constant, or cosine annealing with warm restarts (SGDR), computed on the device.

    Cycle ``i`` lasts ``restart_period × restart_mult**i`` updates and anneals
    from ``lr`` to ``lr_min``. ``lr`` is the tensor the optimiser reads.

    ``scale`` multiplies the scheduled rate (1 unless set): the trainer's plateau recovery raises it for a few
    epochs and puts it back (:meth:`set_scale`, outside the update; :mod:`foxhunt.trainer.recovery`).
    """

    def __init__(self, config: LearnerConfig, device: torch.device | str) -> None:
        self.config = config
        self.lr = torch.full((), config.lr, dtype=torch.float32, device=device)
        self.step = torch.zeros((), dtype=torch.float64, device=device)
        self.scale = torch.ones((), dtype=torch.float32, device=device)

    @torch.no_grad()
    def advance(self) -> None:
        c = self.config
        self.step.add_(1.0)
        if c.lr_schedule == "constant":
            return
        period, mult = float(c.restart_period), float(c.restart_mult)
        if c.restart_mult == 1:
            t_cur = torch.remainder(self.step, period)
            length = torch.full_like(self.step, period)
        else:
            cycle = torch.floor(torch.log1p(self.step * (mult - 1.0) / period) / math.log(mult))
            start = period * (torch.pow(mult, cycle) - 1.0) / (mult - 1.0)
            t_cur = self.step - start
            length = period * torch.pow(mult, cycle)
        lr = c.lr_min + 0.5 * (c.lr - c.lr_min) * (1.0 + torch.cos(math.pi * t_cur / length))
        self.lr.copy_(lr * self.scale)  # scale 1: the same bits as the unscaled rate

    @torch.no_grad()
    def set_scale(self, factor: float) -> None:
        """Multiply the scheduled rate by ``factor`` from now on, the next update included (1 puts it back). The
        constant schedule never rewrites ``lr``, so it is set here; the cosine schedule applies ``scale`` at every
        :meth:`advance`, and its current rate is rescaled on the device."""
        if self.config.lr_schedule == "constant":
            self.lr.fill_(self.config.lr * factor)
        else:
            self.lr.mul_(factor / self.scale)
        self.scale.fill_(factor)

    @torch.no_grad()
    def reset(self) -> None:
        """Fold boundary: restart the schedule at its first cycle."""
        self.step.zero_()
        self.scale.fill_(1.0)
        self.lr.fill_(self.config.lr)


@torch.no_grad()
def polyak_update(target: Sequence[torch.Tensor], online: Sequence[torch.Tensor], tau: torch.Tensor) -> None:
    """``target ← target + τ (online - target)`` for every tensor, with ``tau`` a device tensor (0-d).

    Written as sub/mul/add: ``_foreach_lerp_`` takes a tensor weight as a Python
    scalar and reads it back to the host (a sync inside the step).
    """
    target, online = list(target), list(online)
    step = torch._foreach_sub(online, target)
    torch._foreach_mul_(step, tau)
    torch._foreach_add_(target, step)
