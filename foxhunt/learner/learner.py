"""The ``Learner``: one update = sample, targets, PopArt, shared forward, budgeted gradients, Adam, projections.

Read top to bottom, :meth:`Learner.update` is the whole algorithm:

1. target side, no gradients: the online net picks each branch's next action
   (double DQN), the target net evaluates it (C51 distribution and IQN quantiles);
2. PopArt moves its statistics toward the batch's n-step targets and rescales the
   value output layers of both networks so their unnormalised outputs are unchanged;
3. the online net runs once on the batch; every loss component computes its loss
   from the shared :class:`~foxhunt.learner.inputs.LossInputs`;
4. gradients are isolated per component, clipped to budget, summed, safety-clipped
   (eager ``grad_mode = "loop"``: one ``autograd.grad`` each after one shared forward;
   otherwise the pure :class:`~foxhunt.learner.functional.FunctionalGradients`, which
   ``[learner] compile`` hands to ``torch.compile`` with the target side and the
   spectral projection);
5. AdamW steps; every weight matrix is projected back under σ_max; the target
   net moves toward the online net by τ (read from the ISV);
6. replay priorities are set from the priority component's raw TD error, and the
   α/β anneal and the learning-rate schedule advance.

Nothing in the update reads a tensor value on the host: every changing scalar
(τ, γ, α, β, learning rate, health, budgets) is a device tensor.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import torch

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.errors import CheckpointError, ConfigError
from foxhunt.isv import ISV, IsvLayout
from foxhunt.learner.budgets import GradientBudget, resolve_budgets
from foxhunt.learner.config import LearnerConfig, learner_config_of
from foxhunt.learner.declarations import LEARNER_STATE
from foxhunt.learner.distributional import support_atoms
from foxhunt.learner.functional import FunctionalGradients, GradientStep
from foxhunt.learner.inputs import LossInputs
from foxhunt.learner.network import BranchingNetwork, NetworkOutput
from foxhunt.learner.optim import LRSchedule, make_optimizer, polyak_update
from foxhunt.learner.popart import PopArt
from foxhunt.learner.replay import Batch, Replay
from foxhunt.learner.slots import LearnerReads
from foxhunt.learner.spectral import SpectralNorm
from foxhunt.records import LossComponent

__all__ = ["Learner", "Targets", "priority_component"]

INIT_POWER_ITERATIONS = 50  # at construction u/v start random; later updates refine them one step at a time


@dataclasses.dataclass(frozen=True)  # not attrs.frozen: torch.compile traces dataclass construction
class Targets:
    """The target side of one update: :meth:`Learner.targets` gives unnormalised return units, :meth:`normalised` PopArt's.

    ``atoms``/``probs`` ``[B, Branch, N]``; ``expected`` ``[B, Branch]``; ``quantiles`` ``[B, Branch, T']``.
    """

    atoms: torch.Tensor
    probs: torch.Tensor
    expected: torch.Tensor
    quantiles: torch.Tensor

    def normalised(self, mu: torch.Tensor, sigma: torch.Tensor) -> Targets:
        """In normalised units under per-branch statistics ``mu``/``sigma`` ``[Branch]`` (probabilities unchanged)."""
        return Targets(
            atoms=(self.atoms - mu[:, None]) / sigma[:, None],
            probs=self.probs,
            expected=(self.expected - mu) / sigma,
            quantiles=(self.quantiles - mu[:, None]) / sigma[:, None],
        )


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


class Learner:
    """Owns the networks, optimiser, PopArt, replay and the loss components of one run."""

    def __init__(self, config: Any, layout: IsvLayout, isv: ISV, components: Sequence[LossComponent], obs_dim: int,
                 device: torch.device | str, seed: int, *, n_envs: int = 1, dtype: torch.dtype = torch.float32) -> None:
        self.config: LearnerConfig = learner_config_of(config)
        c = self.config
        self.device = torch.device(device)
        self.dtype = dtype
        self.layout, self.isv = layout, isv
        self.components = list(components)
        # before anything is allocated: a wrong name is a config error, not a fallback
        self.priority_component = (
            priority_component(self.components, c.priority_component) if c.replay.prioritized else None
        )
        self.budgets = resolve_budgets(self.components, c.budgets)
        self.reads = LearnerReads.build(isv, c)
        self.generator = torch.Generator(self.device).manual_seed(seed)

        # parameter init draws from the global RNG; fork it so construction is seeded and leaves it untouched
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(seed)
            self.network = BranchingNetwork(obs_dim, c).to(self.device, dtype)
        self.spectral = SpectralNorm(self.network.weight_matrices(), c.sigma_max, c.power_iterations, self.generator)
        self.spectral.project(INIT_POWER_ITERATIONS)
        self.target = copy.deepcopy(self.network).requires_grad_(False)
        self.params = list(self.network.parameters())
        self.popart = PopArt(len(Branch), self.network.n_actions, c.popart_beta, c.popart_sigma_min, c.popart,
                             self.device, dtype)
        self.replay = Replay(c.replay, obs_dim, n_envs, c.n_step, self.device, self.generator, dtype)
        self.schedule = LRSchedule(c, self.device)
        self.optimizer = make_optimizer(self.params, c, self.schedule.lr)
        self.gradients = GradientBudget(self.params, self.budgets, c.max_grad_norm)
        self.unit_atoms = torch.linspace(-1.0, 1.0, c.n_atoms, device=self.device, dtype=dtype)  # [N]
        self.loss_values = torch.zeros(len(self.components), device=self.device, dtype=dtype)
        self.updates = torch.zeros((), device=self.device, dtype=torch.int64)
        self.signals = self._make_signals()
        self.param_dict = dict(self.network.named_parameters())
        self.obs_dim = obs_dim
        if c.grad_mode == "batched":
            groups = [tuple(range(len(self.components)))]
        else:  # compiled loop groups by reach; the eager loop only shares FunctionalGradients.finish
            groups = self.reach_groups() if c.compile else [(k,) for k in range(len(self.components))]
        self.functional = FunctionalGradients(self.network, self.components, self.priority_component,
                                              self.gradients.limits, c.max_grad_norm, self._inputs, groups)
        # [learner] compile: every piece of the update but the random draws and the (fused) Adam step is compiled
        self.pieces = _compiled_pieces() if c.compile else _EAGER_PIECES

    def _make_signals(self) -> dict[str, torch.Tensor]:
        """Device tensors the adaptive kernels read (docs/adaptive.md, "Signals"), rewritten in place each update."""
        n_br = len(Branch)

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, device=self.device, dtype=torch.float32)

        return {
            contract.Q_MEAN: zeros(n_br),
            contract.Q_STD: zeros(n_br),
            contract.Q_GAP: zeros(n_br),
            contract.GRAD_NORM: zeros(1),
            contract.LOSS: zeros(1),
            contract.BRANCH_GRAD_NORM: zeros(n_br),
            contract.COMPONENT_GRAD_NORM: self.gradients.component_norms,
            contract.COMPONENT_GRAD_NORM_CLIPPED: self.gradients.clipped_norms,
            contract.SAFETY_CLIPS: self.gradients.safety_clips,
        }

    @torch.no_grad()
    def _write_signals(self, step: GradientStep) -> None:
        signals = self.signals
        signals[contract.Q_MEAN].copy_(step.q_mean)
        signals[contract.Q_STD].copy_(step.q_std)
        signals[contract.Q_GAP].copy_(step.q_gap)
        signals[contract.GRAD_NORM].copy_(self.gradients.combined_norm)
        signals[contract.LOSS].copy_(step.losses.sum())
        signals[contract.BRANCH_GRAD_NORM].copy_(step.branch_grad_norm)

    # -- the pieces of one update ---------------------------------------------------
    def support(self) -> torch.Tensor:
        """``[Branch, N]`` atoms this update (from the ISV support slots, or the config's v_min/v_max)."""
        return support_atoms(self.reads.center.to(self.dtype), self.reads.half_width.to(self.dtype),
                             self.config.n_atoms, self.unit_atoms)

    def sample(self, batch_size: int | None = None) -> Batch:
        """A replay batch with n-step returns under the current per-branch γ."""
        return self.pieces.sample(self, self.replay.uniforms(batch_size or self.config.batch_size))

    def _taus(self, batch: int, count: int) -> torch.Tensor:
        return torch.rand(batch, count, generator=self.generator, device=self.device, dtype=self.dtype)

    @torch.no_grad()
    def targets(self, batch: Batch, support: torch.Tensor, taus: torch.Tensor) -> Targets:
        """Double-DQN n-step targets from the target network (IQN at fractions ``taus [B, T']``), unnormalised."""
        b = batch.obs.shape[0]
        next_action = self.network(batch.next_obs, support).q.argmax(-1)  # [B, Branch], online choice
        out = self.target(batch.next_obs, support, taus=taus)
        index = next_action[:, :, None, None].expand(b, len(Branch), 1, self.config.n_atoms)
        probs = out.log_probs.gather(2, index).squeeze(2).exp()  # [B, Branch, N]
        q_index = next_action[:, None, :, None].expand(b, taus.shape[1], len(Branch), 1)
        quantiles = out.quantiles.gather(3, q_index).squeeze(3).transpose(1, 2)  # [B, Branch, T']
        mu, sigma = self.popart.mu, self.popart.sigma
        unnorm_support = support * sigma[:, None] + mu[:, None]  # [Branch, N]
        returns, discounts = batch.returns, batch.discounts  # [B, Branch]
        atoms = returns[..., None] + discounts[..., None] * unnorm_support[None]
        expected = returns + discounts * (probs * unnorm_support[None]).sum(-1)
        quantiles = returns[..., None] + discounts[..., None] * (quantiles * sigma[:, None] + mu[:, None])
        return Targets(atoms, probs, expected, quantiles)

    @torch.no_grad()
    def _prepare_targets(self, batch: Batch, support: torch.Tensor, taus: torch.Tensor,
                         update_statistics: bool) -> Targets:
        """Targets, (optionally) the PopArt step on both networks, and the targets in normalised units."""
        targets = self.targets(batch, support, taus)
        if update_statistics:
            layers = self.network.scalar_output_layers() + self.target.scalar_output_layers()
            self.popart.update(targets.expected, layers)
        return targets.normalised(self.popart.mu, self.popart.sigma)

    def _inputs(self, batch: Batch, online: NetworkOutput, support: torch.Tensor, targets: Targets) -> LossInputs:
        balance = self.reads.grad_balance.to(self.dtype)
        return LossInputs(
            batch=batch,
            online=online,
            support=support,
            target_atoms=targets.atoms,
            target_probs=targets.probs,
            target_q=targets.expected,
            target_quantiles=targets.quantiles,
            action_mask=self.network.action_mask,
            branch_weights=balance / balance.mean(),
            health=self.reads.health.to(self.dtype),
            cql_alpha=self.reads.cql_alpha.to(self.dtype),
            isv=self.isv.tensor,
            layout=self.layout,
            config=self.config,
        )

    def loss_inputs(self, batch: Batch, *, update_statistics: bool = False) -> LossInputs:
        """Targets, (optionally) the PopArt step, and the shared online forward, as one :class:`LossInputs` (eager)."""
        support = self.support()
        targets = self._prepare_targets(batch, support, self._taus(batch.obs.shape[0], self.config.n_target_quantiles),
                                        update_statistics)
        taus = self._taus(batch.obs.shape[0], self.config.n_quantiles)
        return self._inputs(batch, self.network(batch.obs, support, taus=taus, with_ensemble=True), support, targets)

    def reach_groups(self) -> list[tuple[int, ...]]:
        """Component indices grouped by the set of parameters each loss reaches (graph structure, not values).

        Found once, on a two-sample batch of zeros: which parameters get a gradient
        at all is fixed by the network and the loss code, whatever the data.
        """
        c, b, n_br = self.config, 2, len(Branch)

        def zeros(*shape: int, dtype: torch.dtype = self.dtype) -> torch.Tensor:
            return torch.zeros(*shape, device=self.device, dtype=dtype)

        batch = Batch(obs=zeros(b, self.obs_dim), actions=zeros(b, n_br, dtype=torch.int64), returns=zeros(b, n_br),
                      discounts=zeros(b, n_br), next_obs=zeros(b, self.obs_dim), weights=zeros(b) + 1.0,
                      indices=zeros(b, dtype=torch.int64))
        support = self.support()
        targets = self._prepare_targets(batch, support, zeros(b, c.n_target_quantiles) + 0.5, False)
        online = self.network(batch.obs, support, taus=zeros(b, c.n_quantiles) + 0.5, with_ensemble=True)
        inputs = self._inputs(batch, online, support, targets)
        groups: dict[tuple[bool, ...], list[int]] = {}
        for k, component in enumerate(self.components):
            loss = component.loss(inputs)
            grads = (torch.autograd.grad(loss, self.params, retain_graph=True, allow_unused=True)
                     if loss.requires_grad else [None] * len(self.params))
            groups.setdefault(tuple(g is not None for g in grads), []).append(k)
        return [tuple(group) for group in groups.values()]

    def _loop_step(self, batch: Batch, support: torch.Tensor, taus: torch.Tensor, targets: Targets) -> GradientStep:
        """Eager ``grad_mode = "loop"``: the shared forward once, then one ``autograd.grad`` per component."""
        online = self.network(batch.obs, support, taus=taus, with_ensemble=True)
        inputs = self._inputs(batch, online, support, targets)
        losses = [component.loss(inputs) for component in self.components]
        stacked = self.gradients.loop_gradients(losses)
        priority = self.priority_component
        with torch.no_grad():
            return self.functional.finish(torch.stack([loss.detach() for loss in losses]), stacked, online.q,
                                          None if priority is None else priority.per_sample(inputs))

    def update(self, batch: Batch) -> None:
        """One learner update on ``batch`` (the hot path: no host sync, no host branch on tensor values)."""
        b, c = batch.obs.shape[0], self.config
        support = self.support()
        pieces = self.pieces
        targets = pieces.prepare(self, batch, support, self._taus(b, c.n_target_quantiles))
        taus = self._taus(b, c.n_quantiles)
        if c.grad_mode == "loop" and not c.compile:
            step = self._loop_step(batch, support, taus, targets)
        else:
            step = pieces.gradients(self, batch, support, taus, targets)
        pieces.record(self, step, batch)
        self.optimizer.step()
        pieces.after_optimizer(self)

    @torch.no_grad()
    def _record_step(self, step: GradientStep, batch: Batch) -> None:
        """The gradient into ``p.grad``; losses, norms, signals and replay priorities into their live tensors."""
        self.gradients.store(step.budgeted)
        self.loss_values.copy_(step.losses)
        if step.per_sample is not None:
            self.replay.update_priorities(batch.indices, step.per_sample)
        self._write_signals(step)

    @torch.no_grad()
    def _after_optimizer_step(self) -> None:
        """Spectral projection, Polyak target update, and the α/β anneal, schedule and counter advance."""
        self.spectral.project()
        polyak_update(self.target.parameters(), self.network.parameters(), self.reads.tau.to(self.dtype).squeeze(0))
        self.replay.advance()
        self.schedule.advance()
        self.updates.add_(1)

    def step(self, batch_size: int | None = None) -> None:
        """Sample a batch and update on it."""
        self.update(self.sample(batch_size))

    # -- acting and reporting ------------------------------------------------------
    @torch.no_grad()
    def act_values(self, obs: torch.Tensor) -> torch.Tensor:
        """Expected Q per branch action, unnormalised: ``[N, Branch, A]``; padded actions are ``-inf``."""
        q = self.network.expected_q(obs.to(self.dtype), self.support())
        return q * self.popart.sigma[None, :, None] + self.popart.mu[None, :, None]

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
        for p in self.params:
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
        """Copy ``state`` into the live tensors in place (addresses stay valid for captured graphs)."""
        _copy_into(self._state_tensors(), state, "learner state",
                   "load a checkpoint made with the same network shape and loss components", self.generator)

    POLICY_PREFIXES = ("network.", "spectral.", "popart.")  # what acting needs; no replay, optimiser or target

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The tensors that define the greedy policy (a fold's best checkpoint; small: no replay)."""
        return {name: t for name, t in self.state_dict().items() if name.startswith(self.POLICY_PREFIXES)}

    @torch.no_grad()
    def load_policy_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load :meth:`policy_state_dict` output in place (e.g. for ``foxhunt backtest``)."""
        live = {n: t for n, t in self._state_tensors().items() if n.startswith(self.POLICY_PREFIXES)}
        _copy_into(live, state, "policy state", "the checkpoint was made with another network shape or precision", self.generator)

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
        }
        for entry in LEARNER_STATE:
            registry.attach(entry.name, objects[entry.name])


def _copy_into(live: dict[str, torch.Tensor], state: dict[str, torch.Tensor], what: str, hint: str,
               generator: torch.Generator) -> None:
    """Copy ``state`` into the ``live`` tensors in place, after checking names and shapes (``rng`` restores the generator)."""
    missing, unexpected = sorted(set(live) - set(state)), sorted(set(state) - set(live))
    if missing or unexpected:
        raise CheckpointError(f"{what} does not match: missing {missing[:8]}, unexpected {unexpected[:8]}; {hint}")
    for name, tensor in live.items():  # every check before the first copy: a refused load changes nothing
        # copy_ would broadcast a wrong shape or cast a wrong dtype without a word: both are refused first
        if tensor.shape != state[name].shape or tensor.dtype != state[name].dtype:
            raise CheckpointError(
                f"{what} {name!r} is {state[name].dtype} {tuple(state[name].shape)}, expected "
                f"{tensor.dtype} {tuple(tensor.shape)}; {hint}"
            )
    for name, tensor in live.items():
        if name == "rng":
            generator.set_state(state[name].cpu())
        else:
            tensor.detach().copy_(state[name])


# The update's pieces as module-level functions of the learner. Compiled, each has its own code object,
# and dynamo guards on the learner's tensors and settings rather than on its identity, so a second
# learner of the same shape reuses the compiled code instead of recompiling.
def _sample(learner: Learner, uniforms: torch.Tensor) -> Batch:
    return learner.replay.sample_at(uniforms, learner.reads.gamma)


def _prepare(learner: Learner, batch: Batch, support: torch.Tensor, taus: torch.Tensor) -> Targets:
    return learner._prepare_targets(batch, support, taus, True)


def _gradients(learner: Learner, batch: Batch, support: torch.Tensor, taus: torch.Tensor,
               targets: Targets) -> GradientStep:
    return learner.functional(learner.param_dict, batch, support, taus, targets)


def _record(learner: Learner, step: GradientStep, batch: Batch) -> None:
    learner._record_step(step, batch)


def _after_optimizer(learner: Learner) -> None:
    learner._after_optimizer_step()


@dataclasses.dataclass(frozen=True)
class _Pieces:
    sample: Any
    prepare: Any
    gradients: Any
    record: Any
    after_optimizer: Any


_PIECE_FUNCTIONS = (_sample, _prepare, _gradients, _record, _after_optimizer)
_EAGER_PIECES = _Pieces(*_PIECE_FUNCTIONS)


@functools.cache
def _compiled_pieces() -> _Pieces:
    # made on first use: torch.compile imports dynamo, which would double every `foxhunt` command's start-up.
    # fullgraph: a graph break would silently fall back to slow eager pieces; shapes are fixed for the run
    return _Pieces(*(torch.compile(piece, fullgraph=True, dynamic=False) for piece in _PIECE_FUNCTIONS))
