"""A variable selection network over one bar (Lim et al. 2021, the Temporal Fusion Transformer, eqs. 6-8), built
from gated residual networks.

The variables. The observation ``[B, F + P]`` (W = 1: one bar's F market features, then the P portfolio
features) holds V = F + 1 variables: each market feature column is one (a scalar), and the P portfolio columns
together are one more (they describe one thing, the agent's position and its limits, and only mean something
together). Variable ``j`` in that order (the feature columns as the observation orders them, then the
portfolio) is:

- embedded by its own linear map to ``width``: ``ξ_j = w_j x_j + b_j`` for a feature, ``ξ_V = W_p p + b_p``
  for the portfolio;
- passed through its own gated residual network, ``ξ̃_j = GRN_j(ξ_j)`` (``width`` hidden and out, identity
  skip);
- weighted by ``v = softmax(GRN_v(Ξ))``, where ``Ξ = [ξ_1, …, ξ_V]`` is every embedding side by side
  (``V × width``) and ``GRN_v`` maps it to V values (hidden ``width``, a linear skip).

ISV context. With ``[learner] isv_context`` the learner appends C lanes of the live ISV after the portfolio
(:mod:`foxhunt.learner.context`) and builds this encoder with ``context_width = C``: those columns are one more
variable, ``V = F + 2``, embedded by their own linear map ``ξ_(V) = W_c c + b_c`` like the portfolio (the
learning system's state, which only means something as a whole), and the raw context columns follow the raw
portfolio in the output.

The encoder's output is ``Σ_j v_j ξ̃_j`` (``[B, width]``), then the raw portfolio columns: ``width + P`` wide,
as the attention and scan encoders give the trunk. Why the portfolio again: the selection makes a convex mix of
the variables, so the more weight it gives the market features the less of the portfolio survives it, while
every action's value depends on the position held (its cost to change); appended, the trunk reads the position
exactly whatever the selection does, and the selection ranks the market features against each other and against
the portfolio as a whole.

How it is computed: the F feature embeddings are one batched map (weight ``[F, width, 1]``, one einsum), the V
per-variable GRNs are one batched GRN (weights ``[V, out, in]``, one einsum per layer), never a Python loop over
variables; every parameter whose name ends in ``weight`` is a matrix (or a group of matrices) spectral
normalisation can bound, and the layer norms have no learned vector (the block's module,
:mod:`foxhunt_plugins.encoders.gated_residual`, says why). A consequence: the selection logits are a layer norm's
output (mean 0, mean square 1), so no variable can take more than ``e^s / (e^s + (V − 1) e^{−1/s})`` of the
weight, ``s = √(V − 1)`` (0.85 for V = 21).

Reading the selection. :meth:`VariableSelectionEncoder.selection_weights` gives ``v [B, V]`` for a batch of
encoder inputs (``learner.network.encoder.selection_weights(obs)`` on a learner built with this encoder); it is
the forward's own computation, not a second model. Each epoch's ``metrics.jsonl`` row carries their mean over
the replay's newest transitions, one number per variable named ``selection.<feature>``,
``selection.portfolio`` and, with context, ``selection.isv_context``, under ``encoder``
(:func:`selection_diagnostics`, the record's ``diagnostics``).

Per group. Each feature column belongs to a :class:`foxhunt.contract.FeatureGroup` (its family's: market, order
flow, book, multi-timeframe), the portfolio variable is the ``PORTFOLIO`` group and the context variable the
``ISV_CONTEXT`` group. At every epoch boundary the
learner writes the mean over those same rows of each group's summed selection weight into the ISV slot
``vsn.group_selection`` (``[FeatureGroup]``, 0 for a group the run has no column of; they sum to 1), and this
plugin's ``vsn.selection`` monitor reads it, which puts the weights in the ``health_diag`` log, the Prometheus
gauges and the report: how much the agent leans on the book against the bars, epoch by epoch (:func:`group_selection`).

The encoder keeps no state between steps: its only state is its parameters, which are the network's (the
learner's ``learner.network`` entry and its target copy). Settings (``[plugins.vsn]``): ``width`` (16, at least
2: a layer norm over one value is always 0). Off by default: ``[learner] encoder = "vsn"`` selects it
(docs/learner.md, "Encoders").
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import nn

from foxhunt import MONITOR_STATE_PREFIX, AdaptiveMonitor, Encoder, Registrar, ResetCategory, hookimpl, reset_monitor
from foxhunt.contract import VSN_GROUP_SELECTION, FeatureGroup
from foxhunt.learner import BatchedLinear
from foxhunt_plugins.encoders.gated_residual import MIN_WIDTH, GatedResidualNetwork, at_least

__all__ = ["NAME", "GROUP_SELECTION", "VariableSelectionEncoder", "VsnSettings", "VsnMonitor", "selection_diagnostics",
           "group_selection", "group_slot_values", "foxhunt_declare", "foxhunt_encoders", "foxhunt_monitors"]

NAME = "vsn"
GROUP_SELECTION = VSN_GROUP_SELECTION  # [FeatureGroup]: mean selection weight of each group's variables


@attrs.frozen
class VsnSettings:
    """``[plugins.vsn]``: the width of every variable's embedding and of every gated residual network."""

    width: int = attrs.field(default=16, validator=at_least(MIN_WIDTH, "a layer norm over one value is always 0"))


class VariableSelectionEncoder(nn.Module):
    """``[B, n_features + portfolio]`` -> ``[B, width + portfolio]`` (the module docstring says how).

    ``portfolio`` counts every non-window column; its last ``context_width`` are the ISV context."""

    def __init__(self, n_features: int, portfolio: int, settings: VsnSettings, context_width: int = 0) -> None:
        super().__init__()
        if not 0 <= context_width < portfolio:
            raise ValueError(f"the vsn encoder makes the portfolio columns one variable: it needs at least one "
                             f"portfolio column besides the {context_width} ISV context columns, got {portfolio}")
        width = settings.width
        self.n_features, self.portfolio, self.width = n_features, portfolio, width
        self.context_width = context_width
        # V: every feature column, then the portfolio as one, then the ISV context as one when there is any
        self.variables = n_features + 1 + (1 if context_width else 0)
        # ξ_j = w_j x_j + b_j, weight [F, width, 1]
        self.feature_embedding = BatchedLinear(n_features, 1, width, shared_input=False)
        self.portfolio_embedding = nn.Linear(portfolio - context_width, width)  # ξ_V = W_p p + b_p
        # ξ_(V) = W_c c + b_c; only with context, so a network without any has the parameters it had before
        self.context_embedding = nn.Linear(context_width, width) if context_width else None
        self.variable_grns = GatedResidualNetwork(width, width, width, groups=self.variables)  # ξ̃_j = GRN_j(ξ_j)
        self.selection = GatedResidualNetwork(self.variables * width, width, self.variables)  # GRN_v(Ξ)
        self.out_features = width + portfolio

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Encoder inputs ``[B, F + P]`` -> each variable's embedding ``ξ [B, V, width]`` (features, then portfolio,
        then the ISV context)."""
        features = self.feature_embedding(x[:, :self.n_features, None])  # [B, F, width]
        own = x.shape[1] - self.context_width  # where the portfolio's columns end and the context's begin
        variables = [features, self.portfolio_embedding(x[:, self.n_features:own])[:, None]]
        if self.context_embedding is not None:  # fixed for the module: a static branch
            variables.append(self.context_embedding(x[:, own:])[:, None])
        return torch.cat(variables, dim=1)

    def _selection(self, embedded: torch.Tensor) -> torch.Tensor:
        """``ξ [B, V, width]`` -> ``v = softmax(GRN_v(Ξ)) [B, V]``."""
        return torch.softmax(self.selection(embedded.reshape(embedded.shape[0], -1)), dim=-1)

    def selection_weights(self, x: torch.Tensor) -> torch.Tensor:
        """The selection weights ``v [B, V]`` of encoder inputs ``x [B, F + P]``: non-negative, summing to 1 per
        sample; column ``j < F`` is feature column ``j`` of the observation, then the portfolio, then (with
        context) the ISV context.
        Differentiable; call it under ``torch.no_grad()`` to only read them."""
        return self._selection(self.embed(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        embedded = self.embed(x)  # [B, V, width]
        weights = self._selection(embedded)  # [B, V]
        selected = torch.einsum("bv,bvd->bd", weights, self.variable_grns(embedded))  # Σ_j v_j ξ̃_j
        return torch.cat([selected, x[:, self.n_features:]], dim=1)


def build(n_features: int, portfolio: int, settings: VsnSettings, context_width: int = 0) -> VariableSelectionEncoder:
    return VariableSelectionEncoder(n_features, portfolio, settings, context_width)


def selection_diagnostics(module: VariableSelectionEncoder, inputs: torch.Tensor,
                          feature_names: tuple[str, ...]) -> dict[str, float]:
    """The mean selection weight of each variable over ``inputs``: ``selection.<feature name>`` per feature
    column, then ``selection.portfolio`` and, with context, ``selection.isv_context`` (they sum to 1)."""
    context = ["selection.isv_context"] if module.context_width else []
    names = [*(f"selection.{name}" for name in feature_names), "selection.portfolio", *context]
    if len(names) != module.variables:
        raise ValueError(f"the vsn encoder selects among {module.variables} variables, but {len(feature_names)} "
                         f"feature names (+ the portfolio{' and the context' if context else ''}) were given: "
                         f"{list(feature_names)}")
    means = module.selection_weights(inputs).mean(0).tolist()
    return dict(zip(names, means, strict=True))


def group_selection(weights: torch.Tensor, feature_groups: tuple[str, ...], context: bool = False) -> torch.Tensor:
    """Selection weights ``v [B, F + 1]`` (feature columns, then the portfolio; ``[B, F + 2]`` with the ISV
    ``context`` last) -> the batch mean of each :class:`FeatureGroup`'s summed weight ``[FeatureGroup]``: column
    ``j`` counts for group ``feature_groups[j]`` (lower-case names), then ``PORTFOLIO`` and ``ISV_CONTEXT``; a group
    with no column gets 0."""
    tail = [FeatureGroup.PORTFOLIO, *([FeatureGroup.ISV_CONTEXT] if context else [])]
    if weights.shape[-1] != len(feature_groups) + len(tail):
        raise ValueError(f"the vsn encoder selects among {weights.shape[-1]} variables, but {len(feature_groups)} "
                         f"feature groups (+ the portfolio{' and the context' if context else ''}) were given: "
                         f"{list(feature_groups)}")
    index = torch.tensor([*(FeatureGroup[group.upper()] for group in feature_groups), *tail], device=weights.device)
    totals = weights.new_zeros(FeatureGroup.size())
    return totals.index_add_(0, index, weights.mean(0))


def group_slot_values(module: VariableSelectionEncoder, inputs: torch.Tensor,
                      feature_groups: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The ``Encoder.slot_values`` of ``vsn``: :func:`group_selection` of the selection weights of ``inputs``."""
    return {GROUP_SELECTION: group_selection(module.selection_weights(inputs), feature_groups,
                                             context=module.context_width > 0)}


class VsnMonitor(AdaptiveMonitor):
    """Observes the per-group selection weights (one gauge per :class:`FeatureGroup`)."""

    name = "vsn.selection"
    reads = (GROUP_SELECTION,)
    labels = {GROUP_SELECTION: tuple(group.lower() for group in FeatureGroup.names())}


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(VsnSettings)
    registrar.dims(FeatureGroup)
    # Declared whether or not vsn is the run's encoder: a layout depends on the code alone, so choosing the encoder
    # never changes a run's fingerprint. Another encoder leaves it at 0.
    registrar.slot(GROUP_SELECTION, width=FeatureGroup.size(), init=0.0,
                   doc="mean vsn selection weight of each feature group [FeatureGroup] (written at epoch boundaries)")
    registrar.state(GROUP_SELECTION, ResetCategory.FOLD_RESET, doc="rewritten from the network at every epoch boundary")
    # The monitor exists only in runs that select vsn, so its counts are kept for the run (a resetting entry must
    # have its monitor attached in every run).
    registrar.state(MONITOR_STATE_PREFIX + VsnMonitor.name, ResetCategory.TRAINING_PERSIST, reset=reset_monitor,
                    doc="how often the vsn group weights changed, over the run")


@hookimpl
def foxhunt_encoders(settings: VsnSettings) -> list[Encoder]:
    return [Encoder(name=NAME, window=1, build=build, settings=settings, diagnostics=selection_diagnostics,
                    slot_values=group_slot_values, writes=(GROUP_SELECTION,),
                    description="a variable selection network (the Temporal Fusion Transformer's, from gated "
                                "residual networks) over one bar: each feature and the portfolio a variable, "
                                "softmax-weighted, then the portfolio")]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [VsnMonitor()] if config.learner.encoder == NAME else []
