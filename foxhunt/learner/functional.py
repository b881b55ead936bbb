"""The differentiable middle of an update as one pure function of the parameters.

Online forward → :class:`~foxhunt.learner.inputs.LossInputs` → K component
losses → per-component gradients → the run's gradient combiner
(:func:`~foxhunt.learner.combiners.combine`: ``budgeted_sum`` by default),
plus what the rest of the update needs from the same forward: the detached
per-sample TD error (replay priorities), the Q statistics and per-branch
gradient norms (the adaptive kernels' signals).

Per-component gradients come from ``torch.func``: components are split into
groups by the parameters their loss reaches (c51, mse and cql all reach the C51
heads; iqn and ensemble reach heads of their own), and each group is one
``torch.func.vjp`` of its stacked losses, vmapped over the group's one-hot
cotangents (:class:`FunctionalGradients`). Each group traces the forward again,
but only the part its losses reach survives compilation, and no backward runs
on zeros.

It writes nothing and reads nothing on the host, and draws no random numbers
(the caller draws τ), so ``torch.compile`` traces it whole (``fullgraph``) when
``[learner] compile = true``; the learner copies the results into its live
tensors. Eager updates do not come here: one shared forward and one
``autograd.grad`` per component is the cheaper eager form
(:meth:`foxhunt.learner.Learner.update`); they share :meth:`FunctionalGradients.finish`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from foxhunt.learner.budgets import split_flat
from foxhunt.learner.atoms import AtomShape
from foxhunt.learner.combiners import BUDGETED_SUM, CombinedGradient, combine
from foxhunt.learner.inputs import InputSources, LossInputs, build_loss_inputs
from foxhunt.plugin.records import GradientCombiner, LossComponent

__all__ = ["GradientStep", "FunctionalGradients", "q_statistics", "branch_grad_norm"]


@dataclasses.dataclass(frozen=True)
class GradientStep:
    """One update's gradient result. ``losses [K]``; ``per_sample [B]`` or ``None``; Q statistics ``[Branch]``."""

    losses: torch.Tensor
    budgeted: CombinedGradient
    per_sample: torch.Tensor | None
    q_mean: torch.Tensor
    q_std: torch.Tensor
    q_gap: torch.Tensor
    greedy_share: torch.Tensor
    branch_grad_norm: torch.Tensor
    # [Branch, AtomKnot]: what the support kernel moves the atom knots by under [learner] atom_spacing (the targets'
    # batch quantiles, or the knot gradient; AtomShape.signal); None for the even spacing, whose step computes neither
    atom_signal: torch.Tensor | None = None


def q_statistics(q: torch.Tensor, action_mask: torch.Tensor, n_valid: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``q [B, Branch, A]`` (padded actions ``-inf``) -> batch mean/std of the greedy Q, mean max−mean gap, and
    the share of the batch taking the branch's most common greedy action (1 when the policy is one action)."""
    q = q.detach()
    greedy = q.max(-1)  # [B, Branch]
    mean_q = torch.where(action_mask, q, torch.zeros_like(q)).sum(-1) / n_valid  # [B, Branch]
    chosen = torch.nn.functional.one_hot(greedy.indices, q.shape[-1]).to(q.dtype)  # [B, Branch, A]
    greedy_share = chosen.mean(0).max(-1).values  # [Branch]
    return greedy.values.mean(0), greedy.values.std(0, unbiased=False), (greedy.values - mean_q).mean(0), greedy_share


def branch_grad_norm(branch_grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """Norm of the combined gradient over each branch's own parameters (leading dim ``Branch``): ``[Branch]``."""
    squares = [g.reshape(g.shape[0], -1).pow(2).sum(-1) for g in branch_grads]
    return torch.stack(squares).sum(0).sqrt()


class FunctionalGradients:
    """``(params, batch, support, taus, targets) -> GradientStep`` by ``torch.func``.

    ``groups`` partitions the component indices: each group is differentiated
    by one ``torch.func.vjp`` of its stacked losses, vmapped over the group's
    one-hot cotangents. The compiled update groups the components whose losses
    reach the same parameters (:meth:`foxhunt.learner.Learner.reach_groups`), so
    no backward pass runs on zeros and components sharing heads share one pass;
    the result does not depend on the partition.

    Each group's :class:`LossInputs` is :func:`build_loss_inputs` of its forward
    and ``sources`` (the learner's live ISV reads and settings). ``params`` maps
    parameter names to the live parameters. ``combiner`` turns the per-component gradients into one
    (``combiner_parameters [K, W]``, its learned values; empty for one without any). ``atom_shape`` says what
    the step computes for the support kernel (:meth:`AtomShape.signal`; nothing when ``None`` or even).
    """

    def __init__(self, network: nn.Module, components: Sequence[LossComponent], priority: LossComponent | None,
                 limits: torch.Tensor, max_grad_norm: float, sources: InputSources,
                 groups: Sequence[Sequence[int]], combiner: GradientCombiner = BUDGETED_SUM,
                 combiner_parameters: torch.Tensor | None = None, atom_shape: AtomShape | None = None) -> None:
        self.network = network
        self.components = list(components)
        self.priority = priority
        self.sources = sources
        self.groups = [tuple(group) for group in groups]
        if sorted(k for group in self.groups for k in group) != list(range(len(self.components))):
            raise ValueError(f"groups {self.groups} must partition the {len(self.components)} component indices")
        self.names = [name for name, _ in network.named_parameters()]
        self.shapes = [p.shape for _, p in network.named_parameters()]
        own = network.branch_parameters()
        self.branch_index = [i for i, (_, p) in enumerate(network.named_parameters()) if any(p is b for b in own)]
        self.limits = limits
        self.max_grad_norm = float(max_grad_norm)
        self.eyes = [torch.eye(len(group), device=limits.device, dtype=limits.dtype) for group in self.groups]
        self.combiner = combiner
        self.atom_shape = atom_shape
        # the learned spacing's gradient needs the atoms the C51 loss projects onto, per sample when centred: the
        # forward hands them out (fixed for the run: a static branch)
        self.needs_support = atom_shape is not None and atom_shape.spacing == "learned"
        self.combiner_parameters = (limits.new_zeros(len(self.components), 0) if combiner_parameters is None
                                    else combiner_parameters)

    def _forward(self, params: dict[str, torch.Tensor], batch: Any, support: torch.Tensor, taus: torch.Tensor,
                 targets: Any) -> tuple[LossInputs, tuple[torch.Tensor, ...]]:
        online = torch.func.functional_call(self.network, params, (batch.obs, support),
                                            {"taus": taus, "with_ensemble": True, "with_auxiliary": True})
        inputs = build_loss_inputs(batch, online, support, targets, self.sources)
        extras = {"q": online.q.detach()}
        if self.priority is not None:
            extras["per_sample"] = self.priority.per_sample(inputs).detach()
        if self.needs_support:
            extras["support"] = inputs.batch_support().detach()
        return inputs, extras

    def _gradients(self, params: dict[str, torch.Tensor], *args: Any) -> tuple[torch.Tensor, list[torch.Tensor], dict]:
        """Losses ``[K]``, per-parameter gradients stacked ``[K, *shape]``, and the forward's extras."""
        losses: list[torch.Tensor | None] = [None] * len(self.components)
        grads: list[dict[str, torch.Tensor] | None] = [None] * len(self.components)
        aux: dict[str, torch.Tensor] = {}
        for group, eye in zip(self.groups, self.eyes, strict=True):
            def losses_of(p: dict[str, torch.Tensor], group: tuple[int, ...] = group) -> tuple[torch.Tensor, dict]:
                inputs, extras = self._forward(p, *args)
                return torch.stack([self.components[k].loss(inputs) for k in group]), extras

            values, vjp, aux = torch.func.vjp(losses_of, params, has_aux=True)
            (group_grads,) = torch.vmap(vjp)(eye)  # {name: [len(group), *shape]}
            for j, k in enumerate(group):
                losses[k] = values[j]
                grads[k] = {name: g[j] for name, g in group_grads.items()}
        stacked = [torch.stack([grad[name] for grad in grads]) for name in self.names]
        return torch.stack(losses), stacked, aux

    def __call__(self, params: dict[str, torch.Tensor], batch: Any, support: torch.Tensor, taus: torch.Tensor,
                 targets: Any) -> GradientStep:
        losses, stacked, aux = self._gradients(params, batch, support, taus, targets)
        return self.finish(losses, stacked, aux["q"], aux.get("per_sample"), targets, aux.get("support", support))

    def finish(self, losses: torch.Tensor, stacked: Sequence[torch.Tensor], q: torch.Tensor,
               per_sample: torch.Tensor | None, targets: Any, support: torch.Tensor) -> GradientStep:
        """The tail every gradient mode shares (the eager loop too): the combiner, Q statistics, per-branch norms.

        ``losses [K]``; ``stacked`` per parameter ``[K, *shape]``; ``q`` the online expected Q ``[B, Branch, A]``;
        ``targets`` the normalised :class:`~foxhunt.learner.targets.Targets` and ``support`` the atoms the C51 loss
        projects them onto (the atom spacing's signal is computed from both).
        """
        budgeted = combine(self.combiner, stacked, losses, self.limits, self.combiner_parameters, self.max_grad_norm)
        final = split_flat(budgeted.flat, self.shapes)
        q_mean, q_std, q_gap, greedy_share = q_statistics(q, self.network.action_mask, self.network.n_valid)
        return GradientStep(
            losses=losses.detach(),
            budgeted=budgeted,
            per_sample=None if per_sample is None else per_sample.detach(),
            q_mean=q_mean,
            q_std=q_std,
            q_gap=q_gap,
            greedy_share=greedy_share,
            branch_grad_norm=branch_grad_norm([final[i] for i in self.branch_index]),
            atom_signal=None if self.atom_shape is None else self.atom_shape.signal(
                targets.expected, targets.atoms, targets.probs, support),
        )
