"""The branching, dueling, distributional Q-network with an IQN head and an ensemble of value heads.

The input is the encoder input (one bar's observation for the default ``mlp`` encoder, a window of bars for
the others: :mod:`foxhunt.learner.encoders`); the encoder module turns it into the trunk's input. One shared
trunk feeds four kinds of heads:

- **C51 per branch, dueling**: a value stream gives one atom-logit vector per
  branch, an advantage stream gives atom logits per (branch, action); they are
  combined as ``V + A - mean_valid(A)`` per branch.
- **IQN**: a cosine embedding of sampled fractions τ modulates the trunk
  features and yields one quantile value per (τ, branch, action).
- **Ensemble**: K independent value heads, all evaluated by one batched einsum.
- **State value** (only when a loss component asks, ``state_values > 0``): a small
  MLP per branch giving ``state_values`` values of the state per branch (the IQL
  value head's expectiles). With a ``centre`` rule as well, the C51 atoms of
  each sample are centred on those values (:meth:`BranchingNetwork.forward`).
  Without it the network has no such parameters and computes nothing more.
- **Auxiliary** (only when a loss component asks, ``auxiliary_outputs > 0``): a small
  MLP on the trunk's features whose columns are the auxiliary tasks' predictions
  (:mod:`foxhunt.learner.auxiliary`), computed in the update's online forward only.

Branches have different numbers of actions (``foxhunt.actions.branch_sizes``);
action tensors are padded to ``A = max(branch sizes)`` and a fixed
``action_mask [Branch, A]`` marks the real actions. The padded output rows of
every action-producing layer are multiplied by that mask inside the forward,
so padded entries carry no gradient and cannot leak into any loss.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from foxhunt.actions import Branch, branch_sizes
from foxhunt.learner.config import LearnerConfig
from foxhunt.learner import fused_q
from foxhunt.learner.atom_softmax import log_softmax_expectation, log_softmax_expectation_reference
from foxhunt.learner.context import IsvContext
from foxhunt.learner.encoders import IdentityEncoder, build_encoder, encoder_input_width
from foxhunt.learner.distributional import centred_support
from foxhunt.plugin.records import Encoder

__all__ = ["BatchedLinear", "BranchingNetwork", "NetworkOutput", "build_network", "make_action_mask"]


def make_action_mask(sizes: tuple[int, ...], device: torch.device | str | None = None) -> torch.Tensor:
    """``[Branch, A]`` bool: True where the action exists in that branch."""
    width = max(sizes)
    return torch.arange(width, device=device)[None, :] < torch.tensor(sizes, device=device)[:, None]


class BatchedLinear(nn.Module):
    """``G`` independent linear maps applied at once: weight ``[G, out, in]``, bias ``[G, out]``.

    ``shared_input=True`` takes ``x [B, in]`` (the same input for every group);
    otherwise ``x [B, G, in]``. Output ``[B, G, out]``. ``row_mask [G, out]``
    zeroes output rows that do not exist (padded actions).
    """

    def __init__(self, groups: int, in_features: int, out_features: int, shared_input: bool,
                 row_mask: torch.Tensor | None = None) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(groups, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(groups, out_features).uniform_(-bound, bound))
        self.shared_input = shared_input
        if row_mask is not None:
            self.register_buffer("row_mask", row_mask.to(torch.float32))
            with torch.no_grad():
                self.weight.mul_(self.row_mask[..., None])
                self.bias.mul_(self.row_mask)
        else:
            self.row_mask = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight, self.bias
        if self.row_mask is not None:
            weight = weight * self.row_mask[..., None]
            bias = bias * self.row_mask
        if self.shared_input:
            return torch.einsum("bi,goi->bgo", x, weight) + bias
        return torch.einsum("bgi,goi->bgo", x, weight) + bias


class MaskedLinear(nn.Linear):
    """``nn.Linear`` whose padded output rows are held at zero by a fixed mask ``[out]``."""

    def __init__(self, in_features: int, out_features: int, row_mask: torch.Tensor) -> None:
        super().__init__(in_features, out_features)
        self.register_buffer("row_mask", row_mask.to(torch.float32))
        with torch.no_grad():
            self.weight.mul_(self.row_mask[:, None])
            self.bias.mul_(self.row_mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.row_mask[:, None], self.bias * self.row_mask)


@dataclasses.dataclass(frozen=True)  # not attrs.frozen: torch.compile traces dataclass construction
class NetworkOutput:
    """One forward pass. Shapes name the dimensions: B batch, T sampled τ, K heads, N atoms, A actions.

    ``logits``/``log_probs``: ``[B, Branch, A, N]``; ``q``: ``[B, Branch, A]``
    expected values over each branch's support (padded actions are ``-inf``);
    ``quantiles``: ``[B, T, Branch, A]`` or ``None``; ``taus``: ``[B, T]`` or
    ``None``; ``ensemble``: ``[K, B, Branch, A]`` or ``None``; ``state_values``: ``[B, Branch, E]`` from
    the state-value head or ``None`` (no head); ``support``: ``[B, Branch, N]``, the per-sample atoms
    ``log_probs`` and ``q`` are over when the network centres them, else ``None`` (the support passed in);
    ``auxiliary``: ``[B, outputs]`` from the auxiliary head when asked for (``with_auxiliary``), else ``None``.
    """

    log_probs: torch.Tensor
    q: torch.Tensor
    quantiles: torch.Tensor | None = None
    taus: torch.Tensor | None = None
    ensemble: torch.Tensor | None = None
    state_values: torch.Tensor | None = None
    support: torch.Tensor | None = None
    auxiliary: torch.Tensor | None = None


class BranchingNetwork(nn.Module):
    """Trunk + dueling C51 per branch + IQN head + K-head ensemble (see the module docstring).

    ``state_values`` > 0 adds the state-value head (``E`` = ``state_values`` outputs per branch); ``centre``
    (``[B, Branch, E] -> [B, Branch]``, given detached values) then centres each sample's atoms on them, and
    the ``support`` passed to :meth:`forward` is read as the atoms' offsets from that centre
    (``half_width × linspace(-1, 1)``, ``[Branch, N]``). Both come from a loss component's
    :class:`~foxhunt.plugin.records.CentredSupport`; left out, the network is exactly the one without them.
    ``auxiliary_outputs`` > 0 adds the auxiliary head (the loss components' :class:`~foxhunt.plugin.records.AuxiliaryTask`
    columns), built after every other layer for the same reason.
    ``context`` (an :class:`~foxhunt.learner.context.IsvContext`, ``[learner] isv_context``): ISV lanes appended
    to every input by :meth:`encoder_input`, read live at each forward; ``obs_dim`` then counts them.
    """

    def __init__(self, obs_dim: int, config: LearnerConfig, sizes: tuple[int, ...] | None = None,
                 encoder: nn.Module | None = None, *, state_values: int = 0,
                 centre: Callable[[torch.Tensor], torch.Tensor] | None = None, auxiliary_outputs: int = 0,
                 context: IsvContext | None = None) -> None:
        """``obs_dim``: the width of the encoder input (``[B, obs_dim]``, the ISV context's lanes included).
        ``encoder`` maps it to the trunk's input (``encoder.out_features`` wide); ``None`` is the one-bar identity
        (``mlp``)."""
        super().__init__()
        self.input_width = obs_dim  # the encoder input's width: what replay stores and acting feeds per sample
        self.context = context  # not a module or a tensor: no parameter, no state, shared by deepcopy
        sizes = branch_sizes() if sizes is None else tuple(sizes)
        if len(sizes) != len(Branch):
            raise ValueError(f"need one action count per Branch ({len(Branch)}), got {sizes}")
        self.sizes = sizes
        self.n_branches = len(Branch)
        self.n_actions = max(sizes)
        self.n_atoms = config.n_atoms
        self.ensemble_size = config.ensemble_size
        self.fused_acting = config.fused_acting  # on CUDA: acting's expected Q in one kernel (fused_q)
        # the compiled update differentiates the C51 head in closed form (atom_softmax); eager keeps autograd's
        self.closed_form_backward = config.compile
        mask = make_action_mask(sizes)  # [Branch, A]
        self.register_buffer("action_mask", mask)
        self.register_buffer("n_valid", mask.sum(-1).to(torch.float32))  # [Branch]
        self.register_buffer("cos_index", torch.arange(config.n_cos, dtype=torch.float32) * math.pi)  # [n_cos]

        # built before every other layer: the identity draws nothing from the RNG, so the default network's
        # initial weights are what they were before encoders existed
        self.encoder = IdentityEncoder(obs_dim) if encoder is None else encoder
        widths = (self.encoder.out_features, *config.hidden)
        self.trunk = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True))
        features = widths[-1]
        hh, n_br, n_act, n_atoms = config.head_hidden, self.n_branches, self.n_actions, self.n_atoms
        self.value_hidden = nn.Linear(features, hh)
        self.value_out = nn.Linear(hh, n_br * n_atoms)
        atom_rows = mask[:, :, None].expand(n_br, n_act, n_atoms).reshape(n_br, n_act * n_atoms)
        self.advantage_hidden = BatchedLinear(n_br, features, hh, shared_input=True)
        self.advantage_out = BatchedLinear(n_br, hh, n_act * n_atoms, shared_input=False, row_mask=atom_rows)
        action_rows = mask.reshape(n_br * n_act)
        self.iqn_embed = nn.Linear(config.n_cos, features)
        self.iqn_hidden = nn.Linear(features, hh)
        self.iqn_out = MaskedLinear(hh, n_br * n_act, action_rows)
        self.ensemble_hidden = BatchedLinear(config.ensemble_size, features, hh, shared_input=True)
        self.ensemble_out = BatchedLinear(
            config.ensemble_size, hh, n_br * n_act, shared_input=False,
            row_mask=action_rows[None, :].expand(config.ensemble_size, -1),
        )
        # Built last and only on request, so a network without it has the same parameters in the same order.
        self.state_value_hidden = BatchedLinear(n_br, features, hh, shared_input=True) if state_values else None
        self.state_value_out = BatchedLinear(n_br, hh, state_values, shared_input=False) if state_values else None
        self.centre = centre if state_values else None
        self.auxiliary_hidden = nn.Linear(features, hh) if auxiliary_outputs else None
        self.auxiliary_out = nn.Linear(hh, auxiliary_outputs) if auxiliary_outputs else None

    def weight_matrices(self) -> list[nn.Parameter]:
        """Every weight matrix (spectral normalisation bounds each one)."""
        return [p for name, p in self.named_parameters() if name.endswith("weight")]

    def representation_parameters(self) -> list[nn.Parameter]:
        """The encoder's and the trunk's parameters: the features every head reads (``weight_decay_scope = "trunk"``
        decays these alone)."""
        return [*self.encoder.parameters(), *self.trunk.parameters()]

    def branch_parameters(self) -> list[nn.Parameter]:
        """Parameters that belong to one branch each, leading dimension ``Branch`` (the advantage stream)."""
        return [self.advantage_hidden.weight, self.advantage_hidden.bias, self.advantage_out.weight,
                self.advantage_out.bias]

    def scalar_output_layers(self) -> list[nn.Module]:
        """Final layers whose outputs are values (IQN quantiles, ensemble Q): PopArt rescales these."""
        return [self.iqn_out, self.ensemble_out]

    def branch_value_layers(self) -> list[nn.Module]:
        """Final layers with rows ``[Branch, E]`` whose outputs are values (the state-value head): PopArt
        rescales these per branch. Empty without the head."""
        return [] if self.state_value_out is None else [self.state_value_out]

    def encoder_input(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs [B, D]`` (the observation, its window gathered) -> the encoder's input: ``obs`` itself, or with
        the ISV context's live lanes appended to every row ``[B, D + C]``."""
        if self.context is None:  # fixed for the network: a static branch
            return obs
        context = self.context().to(obs.dtype)
        return torch.cat([obs, context.expand(obs.shape[0], context.shape[0])], dim=1)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.encoder_input(obs))  # [B, encoder.out_features]
        for layer in self.trunk:
            h = F.relu(layer(h))
        return h  # [B, H]

    def _streams(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The dueling value ``[B, Branch, 1, N]`` and the advantage stream's hidden layer ``[B, Branch, hh]``."""
        value = self.value_out(F.relu(self.value_hidden(h))).view(h.shape[0], self.n_branches, 1, self.n_atoms)
        return value, F.relu(self.advantage_hidden(h))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Dueling C51 per branch, before the softmax over atoms: ``[B, Branch, A, N]``."""
        batch = h.shape[0]
        value, adv_h = self._streams(h)
        advantage = self.advantage_out(adv_h).view(batch, self.n_branches, self.n_actions, self.n_atoms)
        # padded rows are exactly zero, so the sum over A is the sum over real actions
        adv_mean = advantage.sum(2, keepdim=True) / self.n_valid[None, :, None, None]
        return value + advantage - adv_mean

    def acting_logits(self, h: torch.Tensor) -> torch.Tensor:
        """:meth:`logits` for the real actions, computed with centred weights (padded actions: ``value`` alone).

        The advantage layer is linear, so its mean over a branch's real actions
        can be taken over its weight rows instead of its outputs: one matmul with
        centred weights gives the centred advantages. Subtracting the mean of the
        outputs made every row of a large batch read all of its branch's actions
        again. The compiled update uses it too (its backward then has no mean
        over actions to differentiate); the eager update keeps :meth:`logits`,
        the form the learning-quality test's thresholds were measured with. The
        two differ by float rounding only, but a short run is chaotic: with
        centred weights in the eager update too, that test's AR(1) seeds 1-5
        went from 1.09, 1.53, 0.42, 2.05, 0.32 of the oracle to -0.58, 1.17,
        0.05, 2.05, 0.57.
        """
        value, adv_h = self._streams(h)
        weight, bias = self.centred_advantage_layer()
        return fused_q.torch_logits(adv_h, weight, bias, value)

    def centred_advantage_layer(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``advantage_out``'s weight ``[Branch, A*N, hh]`` and bias ``[Branch, A*N]``, centred over real actions."""
        layer = self.advantage_out
        n_br, n_act, n_atoms = self.n_branches, self.n_actions, self.n_atoms
        mask = self.action_mask[:, :, None].to(layer.weight.dtype)  # [Branch, A, 1]
        count = self.n_valid[:, None, None].to(layer.weight.dtype)
        weight = layer.weight.view(n_br, n_act, n_atoms, -1) * mask[..., None]
        bias = layer.bias.view(n_br, n_act, n_atoms) * mask
        weight = (weight - weight.sum(1, keepdim=True) / count[..., None]) * mask[..., None]
        bias = (bias - bias.sum(1, keepdim=True) / count) * mask
        return weight.reshape(n_br, n_act * n_atoms, -1), bias.reshape(n_br, n_act * n_atoms)

    def distribution(self, h: torch.Tensor, support: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Dueling C51 per branch: ``(log_probs [B, Branch, A, N], q [B, Branch, A])``; ``support`` is ``[Branch, N]``."""
        # shared [Branch, N] or per sample [B, Branch, N]: either way one support per (sample,) branch
        atoms = support[None, :, None, :] if support.dim() == 2 else support[:, :, None, :]
        if self.closed_form_backward:  # compiled: the centred-weight logits (no mean over actions to differentiate)
            log_probs, q = log_softmax_expectation(self.acting_logits(h), atoms)
        else:
            log_probs, q = log_softmax_expectation_reference(self.logits(h), atoms)
        q = q.masked_fill(~self.action_mask, float("-inf"))
        return log_probs, q

    def expected_q(self, obs: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
        """``q [B, Branch, A]`` alone (padded actions ``-inf``): what acting needs.

        Acting does not need the log-probabilities, and writing them is most of
        the cost of a forward pass over tens of thousands of environments
        (``B × Branch × A × N`` floats, twice). Under ``torch.compile`` the
        softmax, the product with the support and the sum fuse into one pass
        over the logits.
        """
        return self.expected_q_of(self.features(obs), support)

    def expected_q_of(self, h: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
        """:meth:`expected_q` from the trunk's features ``h`` (acting that also reads the ensemble shares them).

        On CUDA one fused kernel computes it without writing the logits (:mod:`foxhunt.learner.fused_q`, unless
        ``[learner] fused_acting = false``); elsewhere the torch expression of :meth:`acting_logits`, the softmax
        over atoms and the sum."""
        value, adv_h = self._streams(h)
        weight, bias = self.centred_advantage_layer()
        fused = self.fused_acting and fused_q.applies(h, support)
        compute = fused_q.expected_q if fused else fused_q.torch_expected_q
        q = compute(adv_h, weight, bias, value, support)
        return q.masked_fill(~self.action_mask, float("-inf"))

    def quantile_values(self, h: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """IQN: ``taus [B, T]`` -> quantile values ``[B, T, Branch, A]`` (padded actions are 0)."""
        embedding = torch.cos(taus.unsqueeze(-1) * self.cos_index)  # [B, T, n_cos]
        phi = F.relu(self.iqn_embed(embedding))  # [B, T, H]
        mixed = F.relu(self.iqn_hidden(h.unsqueeze(1) * phi))  # [B, T, hh]
        return self.iqn_out(mixed).view(*taus.shape, self.n_branches, self.n_actions)

    def ensemble_values(self, h: torch.Tensor) -> torch.Tensor:
        """K value heads at once: ``[K, B, Branch, A]`` (padded actions are 0)."""
        hidden = F.relu(self.ensemble_hidden(h))  # [B, K, hh]
        out = self.ensemble_out(hidden)  # [B, K, Branch*A]
        return out.view(h.shape[0], self.ensemble_size, self.n_branches, self.n_actions).transpose(0, 1)

    def state_value_heads(self, h: torch.Tensor) -> torch.Tensor:
        """The state-value head: ``[B, Branch, E]`` (one small MLP per branch on the trunk's features)."""
        return self.state_value_out(F.relu(self.state_value_hidden(h)))

    def auxiliary_heads(self, h: torch.Tensor) -> torch.Tensor:
        """The auxiliary head: ``[B, outputs]`` (one small MLP on the trunk's features)."""
        return self.auxiliary_out(F.relu(self.auxiliary_hidden(h)))

    def forward(self, obs: torch.Tensor, support: torch.Tensor, taus: torch.Tensor | None = None,
                with_ensemble: bool = False, with_auxiliary: bool = False) -> NetworkOutput:
        """One pass. ``with_ensemble``/``with_auxiliary``: also the ensemble's values and the auxiliary head's
        outputs (the update's online forward asks for both; the auxiliary head only exists when built)."""
        h = self.features(obs)
        state_values = None if self.state_value_out is None else self.state_value_heads(h)
        sample_support = None
        if state_values is not None and self.centre is not None:
            # the atoms are coordinates, not a prediction: no distributional loss moves the centre
            sample_support = centred_support(self.centre(state_values.detach()), support)  # [B, Branch, N]
        log_probs, q = self.distribution(h, support if sample_support is None else sample_support)
        quantiles = None if taus is None else self.quantile_values(h, taus)
        ensemble = self.ensemble_values(h) if with_ensemble else None
        auxiliary = self.auxiliary_heads(h) if with_auxiliary and self.auxiliary_out is not None else None
        return NetworkOutput(log_probs, q, quantiles, taus, ensemble, state_values, sample_support, auxiliary)


def build_network(config: LearnerConfig, encoder: Encoder, n_features: int, portfolio_width: int,
                  context: IsvContext | None, *, state_values: int = 0,
                  centre: Callable[[torch.Tensor], torch.Tensor] | None = None,
                  auxiliary_outputs: int = 0) -> BranchingNetwork:
    """The network of a learner config: ``encoder``'s module over the encoder input (its window of ``n_features``
    market columns, the ``portfolio_width`` portfolio columns and the ISV ``context``'s lanes), then the branching
    heads. The learner and a loaded :class:`foxhunt.policy.Policy` both build theirs here, so a saved network
    always loads into the shapes it was saved from. Parameter init draws from the global RNG: the caller forks
    and seeds it. ``state_values``, ``centre``, ``auxiliary_outputs``: as :class:`BranchingNetwork`'s."""
    context_width = 0 if context is None else context.width
    module = build_encoder(encoder, n_features, portfolio_width, context_width)
    return BranchingNetwork(encoder_input_width(encoder.window, n_features, portfolio_width) + context_width, config,
                            encoder=module, state_values=state_values, centre=centre,
                            auxiliary_outputs=auxiliary_outputs, context=context)
