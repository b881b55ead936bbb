"""The ``Learner``: one update = sample, targets, PopArt, shared forward, budgeted gradients, Adam, projections.

Read top to bottom, :meth:`Learner.update` is the whole algorithm:

1. target side, no gradients: the online net picks each branch's next action
   (double DQN), the target net evaluates it (C51 distribution and IQN quantiles);
2. PopArt moves its statistics toward the batch's n-step targets and rescales the
   value output layers of both networks so their unnormalised outputs are unchanged;
3. the online net runs once on the batch; every loss component computes its loss
   from the shared :class:`~foxhunt.learner.inputs.LossInputs`;
4. gradients are isolated per component and combined by the run's gradient combiner (default
   ``budgeted_sum``: clipped to budget, summed), then safety-clipped
   (eager: one ``autograd.grad`` each after one shared forward, :meth:`Learner.loop_gradients`;
   ``[learner] compile``: the pure :class:`~foxhunt.learner.functional.FunctionalGradients`,
   compiled like the other pieces);
5. AdamW steps; every weight matrix is projected back under σ_max; the target
   net moves toward the online net by τ (read from the ISV);
6. replay priorities are set from the priority component's raw TD error, and the
   α/β anneal and the learning-rate schedule advance.

The update calls the named pieces of :mod:`foxhunt.learner.update_pieces` (batch, target side with
PopArt, gradients, recording, after the optimiser), which ``[learner] compile`` compiles whole. Nothing in the update reads a tensor value on the host: every changing scalar
(τ, γ, α, β, learning rate, health, budgets) is a device tensor.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.errors import ConfigError, LayoutError
from foxhunt.isv import ISV, IsvLayout
from foxhunt.learner import fused_q
from foxhunt.learner.auxiliary import auxiliary_layout, future_return_table
from foxhunt.learner.budgets import GradientBudget, resolve_budgets
from foxhunt.learner.combiners import BUDGETED_SUM, select_combiner
from foxhunt.learner.config import LearnerConfig, learner_config_of
from foxhunt.learner.declarations import LEARNER_STATE
from foxhunt.learner.atoms import AtomShape
from foxhunt.learner.distributional import shifted_atoms, support_atoms
from foxhunt.learner.context import IsvContext
from foxhunt.learner.encoders import MLP_ENCODER, select_encoder, window_input
from foxhunt.learner.execution_credit import execution_regret, shaping_table
from foxhunt.learner.functional import FunctionalGradients, GradientStep
from foxhunt.learner.inputs import InputSources, LossInputs, build_loss_inputs
from foxhunt.learner.network import build_network
from foxhunt.learner.optim import LRSchedule, make_optimizer
from foxhunt.learner.conviction import acting_q
from foxhunt.learner.popart import popart_of
from foxhunt.learner.target_policy import expected_sarsa_next
from foxhunt.learner.replay import Batch, Replay
from foxhunt.learner.slots import LearnerReads
from foxhunt.learner.spectral import SpectralNorm
from foxhunt.learner.targets import Targets
from foxhunt.learner.update_pieces import EAGER_PIECES, compiled_pieces
from foxhunt.plugin.records import (ENCODER_DIAGNOSTIC_ROWS, CentredSupport, Encoder, GradientCombiner, LossComponent,
                                     ReplayAugmentation)
from foxhunt.state_loading import check_state

__all__ = ["Learner", "priority_component", "centred_support_request"]

INIT_POWER_ITERATIONS = 50  # at construction u/v start random; later updates refine them one step at a time
COMBINER_PARAMETERS = "combiner.parameters"  # the combiner's learned values in state_dict (only when it has any)


def priority_component(components: Sequence[LossComponent], name: str) -> LossComponent:
    """The enabled loss component called ``name`` whose per-sample TD error sets replay priorities.

    Raises :class:`ConfigError` naming ``learner.priority_component`` and the enabled components that
    give a per-sample TD error, rather than falling back to another component.
    """
    with_td = [comp.name for comp in components if comp.per_sample is not None]
    for comp in components:
        if comp.name == name and comp.per_sample is not None:
            return comp
    names = [comp.name for comp in components]
    reason = "gives no per-sample TD error" if name in names else "is not an enabled loss component"
    choices = ", ".join(with_td) if with_td else "none: set learner.replay.prioritized = false"
    raise ConfigError(
        f"learner.priority_component: {name!r} {reason} (enabled: {', '.join(names) or 'none'}); "
        f"replay priorities can come from: {choices}"
    )


def centred_support_request(components: Sequence[LossComponent]) -> CentredSupport | None:
    """The one :class:`~foxhunt.plugin.records.CentredSupport` the enabled components ask for, or ``None``.

    Two components asking for one each is a :class:`ConfigError` naming both: the network has one state-value
    head and the atoms one centre, so there is nothing sensible to merge.
    """
    asking = [comp for comp in components if comp.centred_support is not None]
    if len(asking) > 1:
        raise ConfigError(
            f"loss components {', '.join(repr(comp.name) for comp in asking)} each ask for atoms centred on a "
            "state-value head (LossComponent.centred_support); enable at most one of them"
        )
    return asking[0].centred_support if asking else None


def _floor_view(isv: ISV, name: str) -> torch.Tensor:
    """The live ``[Branch]`` view of the minimum half-width slot a :class:`CentredSupport` names."""
    if name not in isv.layout.offsets:
        raise LayoutError(f"ISV slot {name!r} (the minimum half-width of the centred atom support) is not in the "
                          "layout; load the plugin that declares it")
    if isv.layout.width(name) != len(Branch):
        raise LayoutError(f"ISV slot {name!r} (the minimum half-width of the centred atom support) has width "
                          f"{isv.layout.width(name)}; the learner reads it as width {len(Branch)} (one per branch)")
    return isv.view(name)


class Learner:
    """Owns the networks, optimiser, PopArt, replay, the loss components and the gradient combiner of one run.

    ``combiners`` are the gradient combiners the run's plugins provide (``PluginHost.gradient_combiners``);
    ``[learner] combiner`` picks one. Left out, only the core's ``budgeted_sum`` is available. ``encoders``
    likewise (``PluginHost.encoders``, ``[learner] encoder``; left out, only the core's ``mlp``).
    ``augmentations`` are the replay augmentations the run's plugins switch on
    (``PluginHost.replay_augmentations``); the replay applies them once the trainer sets its fold.

    ``obs_dim`` is the environment's observation width, ``n_features`` market features then the portfolio's.
    An encoder with a window W > 1 needs ``n_features`` and the fold's feature matrix (:meth:`use_features`):
    the network's input, and each replay batch's ``obs``, is then the encoder input ``[B, W × F + P]``
    (:mod:`foxhunt.learner.encoders`), and :meth:`act_values` needs each observation's bar index. The replay
    builds that input before its augmentations run.
    """

    def __init__(self, config: Any, layout: IsvLayout, isv: ISV, components: Sequence[LossComponent], obs_dim: int,
                 device: torch.device | str, seed: int, *, n_envs: int = 1, dtype: torch.dtype = torch.float32,
                 combiners: Sequence[GradientCombiner] = (BUDGETED_SUM,),
                 encoders: Sequence[Encoder] = (MLP_ENCODER,), n_features: int = 0,
                 augmentations: Sequence[ReplayAugmentation] = ()) -> None:
        self.config: LearnerConfig = learner_config_of(config)
        c = self.config
        self.device = torch.device(device)
        self.dtype = dtype
        if self.device.type == "cuda" and c.fused_acting:
            fused_q.load()  # acting's fused kernel, imported before torch.compile traces the acting path
        self.layout, self.isv = layout, isv
        self.components = list(components)
        # before anything is allocated: a wrong name is a config error, not a fallback
        self.priority_component = (
            priority_component(self.components, c.priority_component) if c.replay.prioritized else None
        )
        self.budgets = resolve_budgets(self.components, c.budgets)
        self.combiner = select_combiner(combiners, c.combiner)
        self.encoder = select_encoder(encoders, c.encoder)
        self.window = self.encoder.window
        if self.window > 1 and not 0 < n_features <= obs_dim:
            raise ValueError(f"encoder {self.encoder.name!r} reads a window of {self.window} bars: the learner needs "
                             f"n_features, the market part of the {obs_dim}-wide observation (got {n_features})")
        self.n_features = n_features
        # ISV slots appended to every encoder input ([learner] isv_context), read live: refused here when undeclared
        self.context = IsvContext(isv.tensor, layout, c.isv_context) if c.isv_context else None
        self.feature_matrix: torch.Tensor | None = None  # the fold's [bars, F], use_features (W > 1 only)
        self.reads = LearnerReads.build(isv, c)
        # a component's CentredSupport (the IQL value head): a state-value head, atoms centred per sample
        self.centring = centred_support_request(self.components)
        self.support_floor = None if self.centring is None else _floor_view(isv, self.centring.floor)
        # the components' AuxiliaryTasks: an auxiliary head's columns and the replay's future returns
        self.auxiliary = auxiliary_layout(self.components)
        self.generator = torch.Generator(self.device).manual_seed(seed)

        # parameter init draws from the global RNG; fork it so construction is seeded and leaves it untouched
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(seed)
            head = {} if self.centring is None else {"state_values": self.centring.outputs,
                                                       "centre": self.centring.centre}
            self.network = build_network(c, self.encoder, n_features, obs_dim - n_features, self.context,
                                         auxiliary_outputs=self.auxiliary.outputs, **head).to(self.device, dtype)
        self.input_dim = self.network.input_width  # the window, the portfolio and the context lanes
        self.spectral = SpectralNorm(self.network.weight_matrices(), c.sigma_max, c.power_iterations, self.generator)
        self.spectral.project(INIT_POWER_ITERATIONS)
        self.target = copy.deepcopy(self.network).requires_grad_(False)
        self.params = list(self.network.parameters())
        self.popart = popart_of(c.popart_stats, len(Branch), self.network.n_actions, c.popart_beta,
                                c.popart_sigma_min, c.popart, self.device, dtype)
        self.replay = Replay(c.replay, obs_dim, n_envs, c.n_step, self.device, self.generator, dtype, augmentations,
                             window=self.window, n_features=n_features, horizon=self.auxiliary.horizon,
                             reward_split=c.reward_split, n_step_mix=c.n_step_mix)
        self.schedule = LRSchedule(c, self.device)
        # The combiner's learned values (uncertainty weighting's log-variances) start at zero and are stepped by
        # the same optimiser as the network; a combiner without any adds no parameter, so the default run's
        # optimiser, state and checkpoints are exactly what they were before combiners existed.
        self.combiner_parameters = torch.nn.Parameter(
            torch.zeros(len(self.components), self.combiner.parameters_per_component, device=self.device, dtype=dtype))
        self.combiner_parameters.grad = torch.zeros_like(self.combiner_parameters)  # a stable address for graphs
        self.optimized = self.params + ([self.combiner_parameters] if self.combiner.parameters_per_component else [])
        decayed = None if c.weight_decay_scope == "all" else self.network.representation_parameters()
        self.optimizer = make_optimizer(self.optimized, c, self.schedule.lr, decayed)
        self.gradients = GradientBudget(self.params, self.budgets, c.max_grad_norm)
        # where the atoms sit in each support: [N] even, or [Branch, N] from the support.knots slot (quantile, learned)
        self.atom_shape = AtomShape(c.n_atoms, c.atom_spacing, c.atom_spacing_mix, self.reads.knots,
                                    dtype=dtype, device=self.device)
        self.loss_values = torch.zeros(len(self.components), device=self.device, dtype=dtype)
        self.updates = torch.zeros((), device=self.device, dtype=torch.int64)
        self.signals = self._make_signals()
        self.param_dict = dict(self.network.named_parameters())
        self.obs_dim = obs_dim
        self.shaping = shaping_table(self.device)  # [Direction, Branch]: which branches shape each direction's order
        self.input_sources = InputSources(self.network.action_mask, self.reads, isv.tensor, layout, c, dtype,
                                          self.shaping if c.shaping_only else None, dict(self.auxiliary.columns))
        # compiled: components grouped by the parameters their loss reaches; eager: only finish() is used
        groups = self.reach_groups() if c.compile else [(k,) for k in range(len(self.components))]
        self.functional = FunctionalGradients(self.network, self.components, self.priority_component,
                                              self.gradients.limits, c.max_grad_norm, self.input_sources, groups,
                                              self.combiner, self.combiner_parameters, self.atom_shape)
        # [learner] compile: every piece of the update but the random draws and the (fused) Adam step is compiled
        self.pieces = compiled_pieces() if c.compile else EAGER_PIECES
        # Multi-device runs set it: called with the learner between the budgeted combination and the optimiser
        # step, it averages the combined gradient over the ranks. None (one process): the update never calls it.
        self.gradient_sync: Callable[[Learner], None] | None = None

    def _make_signals(self) -> dict[str, torch.Tensor]:
        """Device tensors the adaptive kernels read (docs/adaptive.md, "Signals"), rewritten in place each update."""
        n_br = len(Branch)

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, device=self.device, dtype=torch.float32)

        return {
            contract.Q_MEAN: zeros(n_br),
            contract.Q_STD: zeros(n_br),
            contract.Q_GAP: zeros(n_br),
            contract.RETURN_QUANTILES: zeros(n_br, contract.AtomKnot.size()),
            contract.KNOT_GRADIENT: zeros(n_br, contract.AtomKnot.size()),
            contract.GREEDY_SHARE: zeros(n_br),
            contract.GRAD_NORM: zeros(1),
            contract.LOSS: zeros(1),
            contract.BRANCH_GRAD_NORM: zeros(n_br),
            contract.COMPONENT_GRAD_NORM: self.gradients.component_norms,
            contract.COMPONENT_GRAD_NORM_CLIPPED: self.gradients.clipped_norms,
            contract.SAFETY_CLIPS: self.gradients.safety_clips,
        }

    # -- the pieces of one update ---------------------------------------------------
    def support(self) -> torch.Tensor:
        """``[Branch, N]`` atoms this update (from the ISV support slots, or the config's v_min/v_max)."""
        return support_atoms(self.reads.center.to(self.dtype), self.reads.half_width.to(self.dtype),
                             self.config.n_atoms, self.atom_shape())

    def update_support(self) -> torch.Tensor:
        """The atoms the update's forwards use: :meth:`support`, or, when a component centres them per sample,
        their ``[Branch, N]`` offsets ``max(half_width, floor) × unit`` (the atom shape), which the network adds to
        each sample's centre. Acting keeps :meth:`support`: the centre is the same for every action of a branch
        and the width positive, so the greedy action is the same either way."""
        if self.support_floor is None:
            return self.support()
        half = torch.maximum(self.reads.half_width, self.support_floor).to(self.dtype)
        return half[:, None] * self.atom_shape()  # [Branch, 1] × [N] or [Branch, N]

    def sample(self, batch_size: int | None = None) -> Batch:
        """A replay batch with n-step returns under the current per-branch γ."""
        return self.pieces.sample_batch(self, self.replay.uniforms(batch_size or self.config.batch_size))

    def _taus(self, batch: int, count: int) -> torch.Tensor:
        return torch.rand(batch, count, generator=self.generator, device=self.device, dtype=self.dtype)

    @torch.no_grad()
    def targets(self, batch: Batch, support: torch.Tensor, taus: torch.Tensor) -> Targets:
        """Double-DQN n-step targets from the target network (IQN at fractions ``taus [B, T']``), unnormalised.

        ``support`` is :meth:`update_support`'s: with centred atoms each next state's atoms are the target
        network's own centre plus the offsets, and the target network's expected Q of the taken action at
        ``s`` is added for the state-value head.
        """
        b = batch.obs.shape[0]
        online_q = self.network(batch.next_obs, support).q  # [B, Branch, A], the online net picks
        out = self.target(batch.next_obs, support, taus=taus)
        if self.config.target_policy == "expected_sarsa":  # fixed for the run: no branch on a tensor value
            probs, quantiles = expected_sarsa_next(online_q, out.log_probs, out.quantiles, self.reads.sarsa_temperature)
        else:
            next_action = online_q.argmax(-1)  # [B, Branch]
            index = next_action[:, :, None, None].expand(b, len(Branch), 1, self.config.n_atoms)
            probs = out.log_probs.gather(2, index).squeeze(2).exp()  # [B, Branch, N]
            q_index = next_action[:, None, :, None].expand(b, taus.shape[1], len(Branch), 1)
            quantiles = out.quantiles.gather(3, q_index).squeeze(3).transpose(1, 2)  # [B, Branch, T']
        mu, sigma = self.popart.mu, self.popart.sigma
        source = support if out.support is None else out.support  # [Branch, N] shared, or [B, Branch, N]
        unnorm_support = source * sigma[:, None] + mu[:, None]
        returns, discounts = batch.returns, batch.discounts  # [B, Branch]
        here = None
        if out.state_values is not None or self.config.execution_regret:
            here = self.target(batch.obs, support).q  # [B, Branch, A] at s, on the target's own centred atoms
        if self.config.execution_regret:  # fixed for the run: no branch on a tensor value
            chooser = self.network(batch.obs, support).q  # the online net picks, the target net values (double DQN)
            returns = returns + execution_regret(batch.actions, here, chooser, self.network.action_mask, sigma,
                                                 self.shaping)
        atoms = shifted_atoms(returns, discounts, unnorm_support)
        per_sample = unnorm_support if unnorm_support.dim() == 3 else unnorm_support[None]
        expected = returns + discounts * (probs * per_sample).sum(-1)
        quantiles = returns[..., None] + discounts[..., None] * (quantiles * sigma[:, None] + mu[:, None])
        taken_q = None
        if out.state_values is not None:
            # What the value head regresses on: the target network's Q(s, a), as in IQL (Kostrikov et al. 2021).
            taken_q = here.gather(-1, batch.actions[..., None]).squeeze(-1) * sigma + mu
        return Targets(atoms, probs, expected, quantiles, returns, taken_q)

    @torch.no_grad()
    def normalised_targets(self, batch: Batch, support: torch.Tensor, taus: torch.Tensor) -> Targets:
        """:meth:`targets` in PopArt's normalised units, its statistics left as they are."""
        return self.targets(batch, support, taus).normalised(self.popart.mu, self.popart.sigma)

    def loss_inputs(self, batch: Batch) -> LossInputs:
        """The targets and the shared online forward on ``batch`` as one :class:`LossInputs`, eager and without
        the PopArt step (what a loss is given during an update, for a plugin's tests and the conformance kit)."""
        support = self.update_support()
        targets = self.normalised_targets(batch, support, self._taus(batch.obs.shape[0], self.config.n_target_quantiles))
        taus = self._taus(batch.obs.shape[0], self.config.n_quantiles)
        online = self.network(batch.obs, support, taus=taus, with_ensemble=True, with_auxiliary=True)
        return build_loss_inputs(batch, online, support, targets, self.input_sources)

    def reach_groups(self) -> list[tuple[int, ...]]:
        """Component indices grouped by the set of parameters each loss reaches (graph structure, not values).

        Found once, on a two-sample batch of zeros: which parameters get a gradient
        at all is fixed by the network and the loss code, whatever the data.
        """
        c, b, n_br = self.config, 2, len(Branch)

        def zeros(*shape: int, dtype: torch.dtype = self.dtype) -> torch.Tensor:
            return torch.zeros(*shape, device=self.device, dtype=dtype)

        horizon = self.auxiliary.horizon
        batch = Batch(obs=zeros(b, self.input_dim), actions=zeros(b, n_br, dtype=torch.int64), returns=zeros(b, n_br),
                      discounts=zeros(b, n_br), next_obs=zeros(b, self.input_dim), weights=zeros(b) + 1.0,
                      indices=zeros(b, dtype=torch.int64),
                      future_returns=zeros(b, horizon) if horizon else None,
                      future_valid=zeros(b, horizon) + 1.0 if horizon else None)
        support = self.update_support()
        targets = self.normalised_targets(batch, support, zeros(b, c.n_target_quantiles) + 0.5)
        online = self.network(batch.obs, support, taus=zeros(b, c.n_quantiles) + 0.5, with_ensemble=True,
                              with_auxiliary=True)
        inputs = build_loss_inputs(batch, online, support, targets, self.input_sources)
        groups: dict[tuple[bool, ...], list[int]] = {}
        for k, component in enumerate(self.components):
            loss = component.loss(inputs)
            grads = (torch.autograd.grad(loss, self.params, retain_graph=True, allow_unused=True)
                     if loss.requires_grad else [None] * len(self.params))
            groups.setdefault(tuple(g is not None for g in grads), []).append(k)
        return [tuple(group) for group in groups.values()]

    def loop_gradients(self, batch: Batch, support: torch.Tensor, taus: torch.Tensor, targets: Targets) -> GradientStep:
        """The eager update's gradients: the shared forward once, then one ``autograd.grad`` per component."""
        online = self.network(batch.obs, support, taus=taus, with_ensemble=True, with_auxiliary=True)
        inputs = build_loss_inputs(batch, online, support, targets, self.input_sources)
        losses = [component.loss(inputs) for component in self.components]
        stacked = self.gradients.loop_gradients(losses)
        priority = self.priority_component
        with torch.no_grad():
            return self.functional.finish(torch.stack([loss.detach() for loss in losses]), stacked, online.q,
                                          None if priority is None else priority.per_sample(inputs), targets,
                                          inputs.batch_support())

    def update(self, batch: Batch) -> None:
        """One learner update on ``batch`` (the hot path: no host sync, no host branch on tensor values)."""
        b, c, pieces = batch.obs.shape[0], self.config, self.pieces
        support = self.update_support()
        targets = pieces.prepare_targets(self, batch, support, self._taus(b, c.n_target_quantiles))
        taus = self._taus(b, c.n_quantiles)
        if c.compile:
            step = pieces.functional_gradients(self, batch, support, taus, targets)
        else:
            step = self.loop_gradients(batch, support, taus, targets)
        pieces.record_step(self, step, batch)
        if self.gradient_sync is not None:  # multi-device only: the one all-reduce (foxhunt/trainer/distributed.py)
            self.gradient_sync(self)
        self.optimizer.step()
        pieces.after_optimizer_step(self)

    def step(self, batch_size: int | None = None) -> None:
        """Sample a batch and update on it."""
        self.update(self.sample(batch_size))

    # -- acting and reporting ------------------------------------------------------
    def use_features(self, features: torch.Tensor) -> None:
        """The fold's feature matrix ``[bars, F]`` on the learner's device, which an encoder window is gathered
        from at act and sample time (kept by reference: rewrite it in place at a fold boundary). Unused for W = 1."""
        self.replay.set_features(features)
        self.feature_matrix = features

    @property
    def future_horizon(self) -> int:
        """Bars of future returns the loss components read (0: none; the trainer then tracks no bar index)."""
        return self.auxiliary.horizon

    def use_future_returns(self, close: np.ndarray, start: int, stop: int) -> None:
        """The fold's future-return table from the data's close prices and its training window ``[start, stop)``
        (:func:`~foxhunt.learner.auxiliary.future_return_table`); nothing to do when no component reads them."""
        if self.auxiliary.horizon == 0:
            return
        returns, valid = future_return_table(close, start, stop, self.auxiliary.horizon)
        self.replay.set_future_returns(torch.from_numpy(returns), torch.from_numpy(valid))

    @torch.no_grad()
    def act_values(self, obs: torch.Tensor, bars: torch.Tensor | None = None) -> torch.Tensor:
        """Expected Q per branch action, unnormalised: ``[N, Branch, A]``; padded actions are ``-inf``.

        ``obs [N, D]`` is the environment's observation; with an encoder window, ``bars [N]`` is the bar index
        of each observation (``PS.BAR``) and the window is gathered from :meth:`use_features`'s matrix."""
        x = obs.to(self.dtype)
        if self.window > 1:  # fixed for the run: a static branch
            if bars is None or self.feature_matrix is None:
                raise ValueError(f"encoder {self.encoder.name!r} reads {self.window} bars: act_values needs each "
                                 "observation's bar index, and use_features the fold's feature matrix")
            x = window_input(x, bars, self.feature_matrix, self.window)
        q = acting_q(self.network, x, self.support(), self.config.conviction_floor, self.config.conviction_spread)
        return self.popart.unnormalize_q(q)

    @torch.no_grad()
    def encoder_epoch(self, feature_names: Sequence[str], feature_groups: Sequence[str]) -> dict[str, float]:
        """The encoder's epoch-boundary work on the replay's newest transitions, read once: its
        :attr:`Encoder.slot_values` written into its ISV slots (before the monitors observe them), and its
        :attr:`Encoder.diagnostics` returned (``{}`` when it has none). Nothing when the replay is empty. Outside the
        step: it reads the replay's write counter on the host."""
        encoder = self.encoder
        if encoder.diagnostics is None and encoder.slot_values is None:
            return {}
        inputs = self.replay.newest_inputs(ENCODER_DIAGNOSTIC_ROWS).to(self.dtype)
        if inputs.shape[0] == 0:
            return {}
        inputs = self.network.encoder_input(inputs)  # what the encoder reads in a forward: the ISV context too
        if encoder.slot_values is not None:
            self._write_encoder_slots(encoder.slot_values(self.network.encoder, inputs, tuple(feature_groups)))
        if encoder.diagnostics is None:
            return {}
        values = encoder.diagnostics(self.network.encoder, inputs, tuple(feature_names))
        return {str(name): float(value) for name, value in values.items()}

    def _write_encoder_slots(self, values: Mapping[str, Any]) -> None:
        """``values`` into the ISV, refused unless its names are the encoder's ``writes`` and each is as wide as its
        slot."""
        encoder = self.encoder
        if set(values) != set(encoder.writes):
            raise LayoutError(f"encoder {encoder.name!r} returned slot values for {sorted(values)}, but its writes "
                              f"are {sorted(encoder.writes)}: return exactly the slots it names in writes")
        for name, value in values.items():
            view = self.isv.view(name)
            value = torch.as_tensor(value, dtype=view.dtype, device=view.device).reshape(-1)
            if value.numel() != view.numel():
                raise LayoutError(f"encoder {encoder.name!r} returned {value.numel()} values for ISV slot {name!r}, "
                                  f"which is {view.numel()} wide")
            view.copy_(value)

    def metrics(self) -> dict[str, torch.Tensor]:
        """Device tensors for monitors and metrics (read them outside the step)."""
        out: dict[str, torch.Tensor] = {}
        for k, component in enumerate(self.components):
            out[f"loss.{component.name}"] = self.loss_values[k]
            out[f"grad_norm.{component.name}"] = self.gradients.component_norms[k]
            out[f"grad_norm_clipped.{component.name}"] = self.gradients.clipped_norms[k]
        out["grad_norm.combined"] = self.gradients.combined_norm
        out["grad.safety_clips"] = self.gradients.safety_clips
        out["lr"] = self.schedule.lr
        out["popart.mu"] = self.popart.mu
        out["popart.sigma"] = self.popart.sigma
        out["replay.alpha"] = self.replay.alpha
        out["replay.beta"] = self.replay.beta
        out["replay.size"] = torch.clamp(self.replay.written, max=self.replay.rows) * self.replay.n_envs
        out["updates"] = self.updates
        return out

    # -- state -----------------------------------------------------------------------
    def _state_tensors(self) -> dict[str, torch.Tensor]:
        """Every piece of learner state by flat name (the live tensors, not copies)."""
        tensors: dict[str, torch.Tensor] = {}
        for prefix, module in (("network", self.network), ("target", self.target), ("spectral", self.spectral),
                               ("popart", self.popart), ("replay", self.replay)):
            for name, tensor in module.state_dict(keep_vars=True).items():
                tensors[f"{prefix}.{name}"] = tensor
        names = {id(p): name for name, p in self.network.named_parameters()}
        names[id(self.combiner_parameters)] = COMBINER_PARAMETERS
        if self.combiner.parameters_per_component:
            tensors[COMBINER_PARAMETERS] = self.combiner_parameters
        for p in self.optimized:
            for key, tensor in self.optimizer.state[p].items():
                tensors[f"optimizer.{names[id(p)]}.{key}"] = tensor
        tensors["schedule.lr"] = self.schedule.lr
        tensors["schedule.step"] = self.schedule.step
        tensors["gradients.safety_clips"] = self.gradients.safety_clips
        tensors["updates"] = self.updates
        tensors["rng"] = self.generator.get_state()  # a copy: restored through set_state, not in place
        return tensors

    def state_dict(self) -> dict[str, torch.Tensor]:
        """A flat ``{name: tensor}`` copy of all learner state (safetensors-friendly)."""
        return {name: tensor.detach().clone() for name, tensor in self._state_tensors().items()}

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Copy ``state`` into the live tensors in place (addresses stay valid for captured graphs); every name,
        shape and dtype is checked before the first copy, so a refused load changes nothing."""
        live = self._state_tensors()
        check_state(live, state, "learner state", "load a checkpoint made with the same network shape and loss components")
        for name, tensor in live.items():
            if name == "rng":  # the generator's state is a copy: restored through set_state
                self.generator.set_state(state[name].cpu())
            else:
                tensor.detach().copy_(state[name])

    def attach_state(self, registry: Any) -> None:
        """Bind the live objects to the learner's state-reset entries (see :mod:`foxhunt.learner.declarations`)."""
        objects = {
            "learner.network": self.network,
            "learner.target_network": self.target,
            "learner.spectral": self.spectral,
            "learner.popart": self.popart,
            "learner.optimizer": self.optimizer,
            "learner.schedule": self.schedule,
            "learner.replay": self.replay,
            "learner.gradients": self.gradients,
            "learner.rng": self.generator,
            "learner.combiner": self.combiner_parameters,
        }
        for entry in LEARNER_STATE:
            registry.attach(entry.name, objects[entry.name])

