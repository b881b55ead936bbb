"""The ``Learner``: one update = sample, targets, PopArt, shared forward, budgeted gradients, Adam, projections.

Read top to bottom, :meth:`Learner.update` is the whole algorithm:

1. target side, no gradients: the online net picks each branch's next action
   (double DQN), the target net evaluates it (C51 distribution and IQN quantiles);
2. PopArt moves its statistics toward the batch's n-step targets and rescales the
   value output layers of both networks so their unnormalised outputs are unchanged;
3. the online net runs once on the batch; every loss component computes its loss
   from the shared :class:`~foxhunt.learner.inputs.LossInputs`;
4. gradients are isolated per component, clipped to budget, summed, safety-clipped;
5. AdamW steps; every weight matrix is projected back under σ_max; the target
   net moves toward the online net by τ (read from the ISV);
6. replay priorities are set from the priority component's raw TD error, and the
   α/β anneal and the learning-rate schedule advance.

Nothing in the update reads a tensor value on the host: every changing scalar
(τ, γ, α, β, learning rate, health, budgets) is a device tensor.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import attrs
import torch

from foxhunt.actions import Branch
from foxhunt.errors import CheckpointError
from foxhunt.isv import ISV, IsvLayout
from foxhunt.learner.budgets import GradientBudget, resolve_budgets
from foxhunt.learner.config import LearnerConfig, learner_config_of
from foxhunt.learner.declarations import LEARNER_STATE
from foxhunt.learner.distributional import support_atoms
from foxhunt.learner.inputs import LossInputs
from foxhunt.learner.network import BranchingNetwork
from foxhunt.learner.optim import LRSchedule, make_optimizer, polyak_update
from foxhunt.learner.popart import PopArt
from foxhunt.learner.replay import Batch, Replay
from foxhunt.learner.slots import LearnerReads
from foxhunt.learner.spectral import SpectralNorm
from foxhunt.records import LossComponent

__all__ = ["Learner", "Targets"]

INIT_POWER_ITERATIONS = 50  # at construction u/v start random; later updates refine them one step at a time


@attrs.frozen
class Targets:
    """The target side of one update, in *unnormalised* return units (PopArt has not been applied yet).

    ``atoms``/``probs`` ``[B, Branch, N]``; ``expected`` ``[B, Branch]``; ``quantiles`` ``[B, Branch, T']``.
    """

    atoms: torch.Tensor
    probs: torch.Tensor
    expected: torch.Tensor
    quantiles: torch.Tensor


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
        self.gradients = GradientBudget(self.params, self.budgets, c.max_grad_norm, c.grad_mode)
        self.unit_atoms = torch.linspace(-1.0, 1.0, c.n_atoms, device=self.device, dtype=dtype)  # [N]
        self.loss_values = torch.zeros(len(self.components), device=self.device, dtype=dtype)
        self.updates = torch.zeros((), device=self.device, dtype=torch.int64)
        self.priority_component = self._priority_component()
        self.signals = self._make_signals()

    def _make_signals(self) -> dict[str, torch.Tensor]:
        """Device tensors the adaptive kernels read (docs/adaptive.md, "Signals"), rewritten in place each update."""
        n_br = len(Branch)

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, device=self.device, dtype=torch.float32)

        return {
            "learner.q_mean": zeros(n_br),
            "learner.q_std": zeros(n_br),
            "learner.q_gap": zeros(n_br),
            "learner.grad_norm": zeros(1),
            "learner.loss": zeros(1),
            "learner.branch_grad_norm": zeros(n_br),
            "learner.component_grad_norm": self.gradients.component_norms,
            "learner.component_grad_norm_clipped": self.gradients.clipped_norms,
            "learner.safety_clips": self.gradients.safety_clips,
        }

    @torch.no_grad()
    def _write_signals(self, inputs: LossInputs) -> None:
        q = inputs.online.q.detach()  # [B, Branch, A], padded actions -inf
        greedy = q.max(-1).values  # [B, Branch]
        mask = self.network.action_mask
        mean_q = torch.where(mask, q, torch.zeros_like(q)).sum(-1) / self.network.n_valid  # [B, Branch]
        signals = self.signals
        signals["learner.q_mean"].copy_(greedy.mean(0))
        signals["learner.q_std"].copy_(greedy.std(0, unbiased=False))
        signals["learner.q_gap"].copy_((greedy - mean_q).mean(0))
        signals["learner.grad_norm"].copy_(self.gradients.combined_norm)
        signals["learner.loss"].copy_(self.loss_values.sum())
        # each branch's own parameters are its advantage stream (the [Branch, ...] layers)
        squares = [p.grad.reshape(p.shape[0], -1).pow(2).sum(-1) for p in self.network.branch_parameters()]
        signals["learner.branch_grad_norm"].copy_(torch.stack(squares).sum(0).sqrt())

    def _priority_component(self) -> LossComponent | None:
        with_td = [comp for comp in self.components if comp.per_sample is not None]
        preferred = [comp for comp in with_td if comp.name == self.config.priority_component]
        return (preferred or with_td or [None])[0]

    # -- the pieces of one update ---------------------------------------------------
    def support(self) -> torch.Tensor:
        """``[Branch, N]`` atoms this update (from the ISV support slots, or the config's v_min/v_max)."""
        return support_atoms(self.reads.center.to(self.dtype), self.reads.half_width.to(self.dtype),
                             self.config.n_atoms, self.unit_atoms)

    def sample(self, batch_size: int | None = None) -> Batch:
        """A replay batch with n-step returns under the current per-branch γ."""
        return self.replay.sample(batch_size or self.config.batch_size, self.reads.gamma)

    def _taus(self, batch: int, count: int) -> torch.Tensor:
        return torch.rand(batch, count, generator=self.generator, device=self.device, dtype=self.dtype)

    @torch.no_grad()
    def targets(self, batch: Batch, support: torch.Tensor) -> Targets:
        """Double-DQN n-step targets from the target network, unnormalised."""
        b = batch.obs.shape[0]
        next_action = self.network(batch.next_obs, support).q.argmax(-1)  # [B, Branch], online choice
        taus = self._taus(b, self.config.n_target_quantiles)
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

    def loss_inputs(self, batch: Batch, *, update_statistics: bool = False) -> LossInputs:
        """Targets, (optionally) the PopArt step, and the shared online forward, as one :class:`LossInputs`."""
        support = self.support()
        targets = self.targets(batch, support)
        if update_statistics:
            layers = self.network.scalar_output_layers() + self.target.scalar_output_layers()
            self.popart.update(targets.expected, layers)
        mu, sigma = self.popart.mu, self.popart.sigma
        taus = self._taus(batch.obs.shape[0], self.config.n_quantiles)
        online = self.network(batch.obs, support, taus=taus, with_ensemble=True)
        balance = self.reads.grad_balance.to(self.dtype)
        return LossInputs(
            batch=batch,
            online=online,
            support=support,
            target_atoms=(targets.atoms - mu[:, None]) / sigma[:, None],
            target_probs=targets.probs,
            target_q=(targets.expected - mu) / sigma,
            target_quantiles=(targets.quantiles - mu[:, None]) / sigma[:, None],
            action_mask=self.network.action_mask,
            branch_weights=balance / balance.mean(),
            health=self.reads.health.to(self.dtype),
            cql_alpha=self.reads.cql_alpha.to(self.dtype),
            isv=self.isv.tensor,
            layout=self.layout,
            config=self.config,
        )

    def update(self, batch: Batch) -> None:
        """One learner update on ``batch`` (the hot path: no host sync, no host branch on tensor values)."""
        inputs = self.loss_inputs(batch, update_statistics=True)
        losses = [component.loss(inputs) for component in self.components]
        with torch.no_grad():
            self.loss_values.copy_(torch.stack([loss.detach() for loss in losses]))
            if self.priority_component is not None and self.config.replay.prioritized:
                self.replay.update_priorities(batch.indices, self.priority_component.per_sample(inputs))
        self.gradients.apply(losses)
        self._write_signals(inputs)
        self.optimizer.step()
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
        q = self.network(obs.to(self.dtype), self.support()).q
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
        live = self._state_tensors()
        missing, unexpected = sorted(set(live) - set(state)), sorted(set(state) - set(live))
        if missing or unexpected:
            raise CheckpointError(
                f"learner state does not match this learner: missing {missing[:8]}, unexpected {unexpected[:8]}; "
                "load a checkpoint made with the same network shape and loss components"
            )
        for name, tensor in live.items():
            if name == "rng":
                self.generator.set_state(state[name].cpu())
                continue
            if tensor.shape != state[name].shape:
                raise CheckpointError(f"learner state {name!r}: shape {tuple(state[name].shape)} != {tuple(tensor.shape)}")
            tensor.detach().copy_(state[name])

    POLICY_PREFIXES = ("network.", "spectral.", "popart.")  # what acting needs; no replay, optimiser or target

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The tensors that define the greedy policy (a fold's best checkpoint; small: no replay)."""
        return {name: t for name, t in self.state_dict().items() if name.startswith(self.POLICY_PREFIXES)}

    @torch.no_grad()
    def load_policy_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load :meth:`policy_state_dict` output in place (e.g. for ``foxhunt backtest``)."""
        live = {n: t for n, t in self._state_tensors().items() if n.startswith(self.POLICY_PREFIXES)}
        missing, unexpected = sorted(set(live) - set(state)), sorted(set(state) - set(live))
        if missing or unexpected:
            raise CheckpointError(
                f"policy state does not match this network: missing {missing[:8]}, unexpected {unexpected[:8]}; "
                "the checkpoint was made with another network shape"
            )
        for name, tensor in live.items():
            if tensor.shape != state[name].shape:
                raise CheckpointError(f"policy state {name!r}: shape {tuple(state[name].shape)} != {tuple(tensor.shape)}")
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
        }
        for entry in LEARNER_STATE:
            registry.attach(entry.name, objects[entry.name])
