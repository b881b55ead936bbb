"""``LossInputs``: everything a loss component needs, computed once per update and shared.

The learner runs the online network on the batch once (with gradients), and the
target side once (without), then hands every component the same record. A
component only combines these tensors; it never runs a network itself, so
adding a component adds its loss arithmetic and nothing else.

:func:`build_loss_inputs` makes the record from the update's values (batch,
forward, support, targets) and the learner's :class:`InputSources` (live views
fixed for the learner's life: ISV reads, action mask, settings). It is a pure
function, so the eager update and the ``torch.func`` one build the record the
same way.

All values are in PopArt-normalised return units. Shapes: B batch, T/T'
sampled τ (online/target), K ensemble heads, N atoms, A actions (padded to
the largest branch; ``action_mask`` marks real ones).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from foxhunt.isv import IsvLayout
from foxhunt.learner.config import LearnerConfig
from foxhunt.learner.execution_credit import shaping_weights
from foxhunt.learner.network import NetworkOutput
from foxhunt.learner.replay import Batch
from foxhunt.learner.slots import LearnerReads
from foxhunt.learner.targets import Targets

__all__ = ["LossInputs", "InputSources", "build_loss_inputs"]


@dataclasses.dataclass(frozen=True)  # not attrs.frozen: torch.compile traces dataclass construction
class LossInputs:
    """One update's shared inputs.

    - ``batch``: the sampled :class:`~foxhunt.learner.replay.Batch`.
    - ``online``: :class:`~foxhunt.learner.network.NetworkOutput` on ``batch.obs``
      (``log_probs [B, Branch, A, N]``, ``q [B, Branch, A]``, ``quantiles [B, T, Branch, A]``,
      ``taus [B, T]``, ``ensemble [K, B, Branch, A]``), differentiable.
    - ``support``: the atoms ``log_probs`` are over: ``[Branch, N]`` shared by the batch, or ``[B, Branch, N]``
      per sample when a component's :class:`~foxhunt.plugin.records.CentredSupport` centres them on each
      sample's state value (the IQL value head). :meth:`LossInputs.batch_support` gives either as
      ``[B or 1, Branch, N]``.
    - ``target_atoms``/``target_probs`` ``[B, Branch, N]``: the shifted target atoms
      ``r + γ^m z`` and their target-network probabilities at the next action the
      online net prefers (double DQN); not yet projected. Non-decreasing along N
      (an increasing affine image of the support), so ``project_sorted`` applies.
    - ``target_q [B, Branch]``: the expected n-step target ``r + γ^m E[Z']``.
    - ``target_quantiles [B, Branch, T']``: ``r + γ^m θ'(τ')`` from the target IQN head.
    - ``target_rewards [B, Branch]``: the n-step discounted reward part ``r`` of those targets alone (the
      execution credit included when it is on), normalised by the same ``(x − μ) / σ`` as ``target_q``, so
      ``σ (target_q − target_rewards) = γ^m E[Z']``: the value beyond the n-step horizon.
    - ``target_taken_q [B, Branch]`` or ``None``: the target network's expected Q of the taken action at
      ``s`` (only when the network has a state-value head; what that head regresses on).
    - ``branch_weights [Branch]``: mean-1 weights for averaging over branches (``grad_balance.scale``);
      ``[B, Branch]`` with ``[learner] shaping_only``, where an execution branch's weight is 0 on the samples
      whose order it did not shape (:mod:`foxhunt.learner.execution_credit`).
    - ``health [1]``, ``cql_alpha [1]``: the ISV slots (or their config fallbacks).
    - ``isv``/``layout``: the whole ISV, for components reading slots of their own.
    - ``auxiliary_columns``: each :class:`~foxhunt.plugin.records.AuxiliaryTask` component's columns of
      ``online.auxiliary`` (:meth:`auxiliary` reads them); ``batch.future_returns``/``future_valid`` ``[B, H]``
      the market's standardised next returns and their mask (:mod:`foxhunt.learner.auxiliary`).
    """

    batch: Batch
    online: NetworkOutput
    support: torch.Tensor
    target_atoms: torch.Tensor
    target_probs: torch.Tensor
    target_q: torch.Tensor
    target_quantiles: torch.Tensor
    target_rewards: torch.Tensor
    action_mask: torch.Tensor
    branch_weights: torch.Tensor
    health: torch.Tensor
    cql_alpha: torch.Tensor
    isv: torch.Tensor
    layout: IsvLayout
    config: LearnerConfig
    target_taken_q: torch.Tensor | None = None
    auxiliary_columns: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)

    def auxiliary(self, name: str) -> torch.Tensor:
        """Component ``name``'s columns of the auxiliary head, ``[B, outputs]`` (its ``AuxiliaryTask.outputs``)."""
        if name not in self.auxiliary_columns or self.online.auxiliary is None:
            raise KeyError(f"loss component {name!r} has no auxiliary head columns: give its LossComponent an "
                           f"AuxiliaryTask (components with one: {sorted(self.auxiliary_columns) or 'none'})")
        start, stop = self.auxiliary_columns[name]
        return self.online.auxiliary[:, start:stop]

    def batch_support(self) -> torch.Tensor:
        """The atoms as ``[B, Branch, N]`` (per sample) or ``[1, Branch, N]`` (shared): what projections broadcast."""
        return self.support if self.support.dim() == 3 else self.support[None]

    def taken(self, values: torch.Tensor, action_dim: int = 2) -> torch.Tensor:
        """Select the taken action of each branch: ``values [B, ..., Branch, A, ...]`` -> without the A dim.

        ``action_dim`` is the position of A (2 for ``[B, Branch, A, ...]``, 3 for ``[B, T, Branch, A]``).
        """
        actions = self.batch.actions  # [B, Branch]
        chosen = torch.arange(values.shape[action_dim], device=actions.device) == actions[..., None]  # [B, Branch, A]
        # laid onto values: B, the dims before Branch (T), Branch and A, then those after A (N)
        before, after = [1] * (action_dim - 2), [1] * (values.dim() - action_dim - 1)
        chosen = chosen.view(chosen.shape[0], *before, *chosen.shape[1:], *after)
        # a masked sum rather than a gather: the same values exactly (one term, the rest +0; padded -inf never
        # read), and its backward is a select instead of a scatter, which the compiled update fuses into the
        # kernels around it instead of writing a zero-filled [B, ..., A, ...] gradient
        return torch.where(chosen, values, 0.0).sum(action_dim)

    def branch_mean(self, values: torch.Tensor) -> torch.Tensor:
        """``[..., Branch]`` -> ``[...]``, weighted by ``branch_weights``."""
        return (values * self.branch_weights).mean(-1)

    def batch_mean(self, per_sample: torch.Tensor) -> torch.Tensor:
        """Importance-weighted batch mean of ``per_sample [B]`` (prioritized replay's bias correction)."""
        return (per_sample * self.batch.weights).mean()

    def slot(self, name: str) -> torch.Tensor | None:
        """A live view of ISV slot ``name`` when the layout has it, else ``None`` (a static check, no sync)."""
        if name not in self.layout.offsets:
            return None
        return self.isv[self.layout.span(name)]


@dataclasses.dataclass(frozen=True)
class InputSources:
    """What every update's :class:`LossInputs` carries beside its batch, forward and targets.

    Live tensors read at each update, never copied: ``action_mask [Branch, A]`` (the network's),
    ``reads`` (the learner's ISV views or config fallbacks), the whole ``isv`` buffer with its ``layout``;
    and fixed settings: ``config``, the update's ``dtype`` and the auxiliary head's ``auxiliary_columns``
    (:class:`~foxhunt.learner.auxiliary.AuxiliaryLayout`). ``shaping [Direction, Branch]``
    (:func:`~foxhunt.learner.execution_credit.shaping_table`) when ``[learner] shaping_only`` is on, else ``None``.
    """

    action_mask: torch.Tensor
    reads: LearnerReads
    isv: torch.Tensor
    layout: IsvLayout
    config: LearnerConfig
    dtype: torch.dtype
    shaping: torch.Tensor | None = None
    auxiliary_columns: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


def build_loss_inputs(batch: Batch, online: NetworkOutput, support: torch.Tensor, targets: Targets,
                      sources: InputSources) -> LossInputs:
    """The update's :class:`LossInputs` around the online forward ``online`` and normalised ``targets``."""
    reads, dtype = sources.reads, sources.dtype
    balance = reads.grad_balance.to(dtype)
    weights = balance / balance.mean()  # [Branch]
    if sources.shaping is not None:  # each execution branch learns only from the orders it shaped: [B, Branch]
        weights = weights * shaping_weights(batch.actions, sources.shaping).to(dtype)
    return LossInputs(
        batch=batch,
        online=online,
        support=support if online.support is None else online.support,  # per sample when the network centres
        target_atoms=targets.atoms,
        target_probs=targets.probs,
        target_q=targets.expected,
        target_quantiles=targets.quantiles,
        target_rewards=targets.rewards,
        action_mask=sources.action_mask,
        branch_weights=weights,
        health=reads.health.to(dtype),
        cql_alpha=reads.cql_alpha.to(dtype),
        isv=sources.isv,
        layout=sources.layout,
        config=sources.config,
        target_taken_q=targets.taken_q,
        auxiliary_columns=sources.auxiliary_columns,
    )
