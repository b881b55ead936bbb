"""Device-resident replay: a ring buffer of vectorised-env transitions with n-step returns and priorities.

Layout is time-major, ``[rows, E]`` for ``E`` parallel environments, so the
transition ``k`` steps after ``(row, env)`` is ``(row + k, env)``: n-step returns
are assembled at *sampling* time from the current per-branch γ (an adaptive
kernel may move γ; stored returns would go stale). A window stops early at an
episode end (no bootstrap past a terminal) and at the newest row written (a
shorter, still exact, m-step return bootstrapped with γ^m).

Prioritized sampling draws by inverse CDF: a float64 cumulative sum of
``priority^α`` over every slot and ``torch.searchsorted``. It needs no
power-of-two tree, so any capacity is exact, and it is stratified (one draw per
``1/B`` of the mass) as in Schaul et al. Empty slots carry zero mass and can
never be drawn; if every filled slot has zero mass, sampling is uniform over
the filled slots. Everything stays on the device: no ``.item()``, no host branch.

Replay augmentations (plugin records, :mod:`foxhunt.learner.augmentation`) then replace each one's share of
the sampled batch by augmented copies, in name order: by default the counterfactual mirror (the ``mirror``
plugin; observations mirrored, SHORT and LONG swapped). An augmented copy's priority update goes to the
original's slot. A replay whose fold was never set (:meth:`Replay.set_fold`; filled outside the trainer)
applies none.

With an encoder window W > 1 (``window``), each transition also stores the bar
index of its observation and of its next observation (``bars``/``next_bars``,
``[rows, E]`` int64) instead of W copies of the features: sampling rebuilds
both encoder inputs ``[B, W × F + P]`` by gathering the W - 1 earlier rows
from the fold's feature matrix (:meth:`Replay.set_features`,
:func:`foxhunt.learner.encoders.window_input`) before any augmentation runs: an
augmentation sees the windowed observation (its fold, ``AugmentationFold.window``,
says W; the mirror's map covers every row of the window, the portfolio columns
still close the observation).

When a loss component asks for the market's next returns (an
:class:`~foxhunt.plugin.records.AuxiliaryTask`, ``horizon`` > 0), each transition
stores its observation's bar index too, and sampling gathers that bar's row of
the fold's future-return table (:meth:`Replay.set_future_returns`,
:func:`foxhunt.learner.auxiliary.future_return_table`) into
``Batch.future_returns``/``future_valid``. A transition stored without a bar
index, or sampled before any table was set, has every future return masked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import nn

from foxhunt.actions import Branch
from foxhunt.learner.augmentation import Augmentations
from foxhunt.learner.config import ReplayConfig
from foxhunt.learner.encoders import window_input
from foxhunt.learner.execution_credit import branch_rewards, execution_columns
from foxhunt.plugin.records import AugmentationFold, ReplayAugmentation

__all__ = ["Batch", "Replay"]


SPREAD_WIDTH = 32  # values per row of spread_max's first stage


def spread_max(values: torch.Tensor) -> torch.Tensor:
    """``values.max()`` of a 1-D tensor, taken as the max of row maxima when its length is a multiple of
    :data:`SPREAD_WIDTH`: the same value exactly (a max does not depend on order).

    Compiled on CUDA, inductor fuses the work that produces ``values`` into the reduction that consumes them. A
    single max is one thread block, so the stratified draw's binary searches ran there one after another (72 µs
    of a batch of 8 192 on an H200); row maxima spread them over a block per few rows.
    """
    if values.shape[0] % SPREAD_WIDTH or values.shape[0] <= SPREAD_WIDTH:  # shapes are static: a trace-time branch
        return values.max()
    return values.view(-1, SPREAD_WIDTH).amax(1).max()


@dataclasses.dataclass(frozen=True)  # not attrs.frozen: torch.compile traces dataclass construction
class Batch:
    """A sampled batch. B = batch size, D = observation width (the encoder input's, W × F + P, with a window).

    ``obs``/``next_obs`` ``[B, D]`` (``next_obs`` is the bootstrap observation m
    steps later); ``actions`` ``[B, Branch]`` int64; ``returns`` ``[B, Branch]``
    discounted m-step rewards (with ``reward_split``, each branch's part of them); ``discounts`` ``[B, Branch]`` = γ_b^m, zero when the
    episode ended inside the window; ``weights`` ``[B]`` importance weights
    (max 1); ``indices`` ``[B]`` flat slot indices for priority updates; ``future_returns``/``future_valid``
    ``[B, H]`` the market's standardised log-returns over the H bars after ``obs``'s bar and their mask (1 where
    known inside the training window), only when a loss component asks for them (else ``None``). An
    augmentation that reverses the market's direction (the mirror) negates ``future_returns``.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    returns: torch.Tensor
    discounts: torch.Tensor
    next_obs: torch.Tensor
    weights: torch.Tensor
    indices: torch.Tensor
    future_returns: torch.Tensor | None = None
    future_valid: torch.Tensor | None = None


class Replay(nn.Module):
    """Ring buffer of ``rows = capacity // n_envs`` time steps for ``n_envs`` environments (all buffers).

    ``augmentations`` are the run's replay augmentations (``PluginHost.replay_augmentations``), applied to
    every sampled batch from the first :meth:`set_fold` on."""

    def __init__(self, config: ReplayConfig, obs_dim: int, n_envs: int, n_step: int,
                 device: torch.device | str, generator: torch.Generator, dtype: torch.dtype = torch.float32,
                 augmentations: Sequence[ReplayAugmentation] = (), *, window: int = 1, n_features: int = 0,
                 horizon: int = 0, reward_split: bool = False, n_step_mix: int = 0) -> None:
        super().__init__()
        rows = config.capacity // n_envs
        if rows < n_step + 1:
            raise ValueError(
                f"replay capacity {config.capacity} holds {rows} steps of {n_envs} environments; it needs at least "
                f"n_step + 1 = {n_step + 1} steps: raise [learner.replay] capacity or lower n_step"
            )
        self.config = config
        self.rows, self.n_envs, self.n_step, self.obs_dim = rows, n_envs, n_step, obs_dim
        if not 0 <= n_step_mix < n_step:
            raise ValueError(f"n_step_mix = {n_step_mix} must be 0 (off) or shorter than n_step = {n_step}")
        self.n_step_mix = n_step_mix  # [learner] n_step_mix: half the sampled returns stop after this many steps
        self.slots = rows * n_envs
        self.generator = generator
        kw = {"device": device}
        self.register_buffer("obs", torch.zeros(rows, n_envs, obs_dim, dtype=dtype, **kw))
        self.register_buffer("next_obs", torch.zeros(rows, n_envs, obs_dim, dtype=dtype, **kw))
        self.register_buffer("actions", torch.zeros(rows, n_envs, len(Branch), dtype=torch.int64, **kw))
        self.register_buffer("rewards", torch.zeros(rows, n_envs, dtype=dtype, **kw))
        # [learner] reward_split: each reward's execution part (foxhunt.env.tables.PS.STEP_EXECUTION), registered only
        # for such a run; the n-step returns then give each branch its part (execution_credit.branch_rewards)
        self.reward_split = reward_split
        if reward_split:
            self.register_buffer("executions", torch.zeros(rows, n_envs, dtype=dtype, **kw))
            self.execution_columns = execution_columns(device, dtype)
        self.register_buffer("dones", torch.zeros(rows, n_envs, dtype=dtype, **kw))
        self.register_buffer("priorities", torch.zeros(rows, n_envs, dtype=torch.float32, **kw))  # raw |δ| + eps
        self.register_buffer("written", torch.zeros((), dtype=torch.int64, **kw))  # rows ever written
        self.register_buffer("max_priority", torch.ones((), dtype=torch.float32, **kw))
        self.register_buffer("step", torch.zeros((), dtype=torch.float32, **kw))  # anneals α and β
        self.register_buffer("alpha", torch.full((), config.alpha, dtype=torch.float32, **kw))
        self.register_buffer("beta", torch.full((), config.beta, dtype=torch.float32, **kw))
        self.register_buffer("row_ids", torch.arange(rows, **kw))
        # the encoder window: bar indices, registered only for W > 1 (a one-bar replay's state is what it was)
        self.window, self.n_features = window, n_features
        self.window_features: torch.Tensor | None = None  # the fold's feature matrix [bars, F], set_features
        # the future returns of an auxiliary task: gathered by the stored bar index from the fold's table
        self.horizon = horizon
        self.future_table: torch.Tensor | None = None  # [bars, H] standardised log-returns, set_future_returns
        self.future_mask: torch.Tensor | None = None  # [bars, H] 1 where known inside the training window
        self.tracks_bars = window > 1 or horizon > 0
        if self.tracks_bars:
            self.register_buffer("bars", torch.zeros(rows, n_envs, dtype=torch.int64, **kw))
        if window > 1:
            self.register_buffer("next_bars", torch.zeros(rows, n_envs, dtype=torch.int64, **kw))
        self.augmentations = Augmentations(augmentations, device, dtype)

    # -- writing ---------------------------------------------------------------
    @torch.no_grad()
    def add(self, obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, next_obs: torch.Tensor,
            dones: torch.Tensor, bars: torch.Tensor | None = None, next_bars: torch.Tensor | None = None,
            executions: torch.Tensor | None = None) -> None:
        """Append one step of every environment: ``obs``/``next_obs`` ``[E, D]``, ``actions`` ``[E, Branch]``,
        ``rewards``/``dones`` ``[E]``; with an encoder window, ``bars``/``next_bars`` ``[E]``: the bar index of
        ``obs`` and of ``next_obs`` (for W = 1 ``next_bars`` is ignored, and ``bars`` is kept only when an
        auxiliary task reads future returns: left out there, the step's future returns are masked); with
        ``reward_split``, ``executions`` ``[E]``: each reward's execution part (required).
        New transitions get the largest priority seen so far."""
        row = torch.remainder(self.written, self.rows).view(1)
        self.obs.index_copy_(0, row, obs.to(self.obs.dtype).unsqueeze(0))
        self.next_obs.index_copy_(0, row, next_obs.to(self.obs.dtype).unsqueeze(0))
        self.actions.index_copy_(0, row, actions.to(torch.int64).unsqueeze(0))
        self.rewards.index_copy_(0, row, rewards.to(self.rewards.dtype).unsqueeze(0))
        self.dones.index_copy_(0, row, dones.to(self.dones.dtype).unsqueeze(0))
        if self.reward_split:
            if executions is None:
                raise ValueError("this replay splits rewards by branch ([learner] reward_split): add() needs each "
                                 "reward's execution part (executions=, the environment's PS.STEP_EXECUTION)")
            self.executions.index_copy_(0, row, executions.to(self.rewards.dtype).unsqueeze(0))
        self.priorities.index_copy_(0, row, self.max_priority.expand(1, self.n_envs))
        if self.window > 1:
            if bars is None or next_bars is None:
                raise ValueError(f"this replay rebuilds encoder windows of {self.window} bars: add() needs the bar "
                                 "index of obs and next_obs (bars=, next_bars=)")
            self.next_bars.index_copy_(0, row, next_bars.to(torch.int64).unsqueeze(0))
        if self.tracks_bars:
            known = torch.full((1, self.n_envs), -1, dtype=torch.int64, device=self.bars.device) if bars is None \
                else bars.to(torch.int64).unsqueeze(0)
            self.bars.index_copy_(0, row, known)
        self.written.add_(1)

    @torch.no_grad()
    def update_priorities(self, indices: torch.Tensor, td_error: torch.Tensor) -> None:
        """Set the priorities of sampled slots from their raw TD error ``[B]`` (|δ| + eps; α applies at sampling).

        A slot drawn more than once in a batch takes the largest of its priorities. With an augmentation its
        copies have different TD errors (the original and, say, its mirror), and a plain indexed write would keep
        whichever the device happened to write last: on CUDA a graph replay and an eager run then part ways."""
        priority = td_error.detach().abs().to(torch.float32) + self.config.priority_eps
        self.priorities.view(-1).scatter_reduce_(0, indices, priority, reduce="amax", include_self=False)
        self.max_priority.copy_(torch.maximum(self.max_priority, priority.max()))

    @torch.no_grad()
    def advance(self) -> None:
        """One learner update done: move α and β along their linear anneal."""
        self.step.add_(1.0)
        frac = torch.clamp(self.step / self.config.anneal_steps, max=1.0)
        c = self.config
        self.alpha.copy_(c.alpha + (c.alpha_final - c.alpha) * frac)
        self.beta.copy_(c.beta + (c.beta_final - c.beta) * frac)

    @torch.no_grad()
    def reset(self) -> None:
        """Fold boundary: empty the buffer and restart the anneal."""
        for buffer in (self.obs, self.next_obs, self.actions, self.rewards, self.dones, self.priorities, self.written,
                       self.step):
            buffer.zero_()
        if self.tracks_bars:
            self.bars.zero_()
        if self.window > 1:
            self.next_bars.zero_()
        if self.reward_split:
            self.executions.zero_()
        self.max_priority.fill_(1.0)
        self.alpha.fill_(self.config.alpha)
        self.beta.fill_(self.config.beta)

    def set_features(self, features: torch.Tensor) -> None:
        """The fold's feature matrix ``[bars, F]`` on the replay's device, which windows are gathered from (kept by
        reference: the trainer rewrites it in place at each fold, and the replay is emptied there too)."""
        if features.ndim != 2 or features.shape[1] != self.n_features or features.device != self.obs.device:
            raise ValueError(f"the feature matrix must be [bars, {self.n_features}] on {self.obs.device}, got "
                             f"{tuple(features.shape)} on {features.device}")
        self.window_features = features

    @torch.no_grad()
    def set_future_returns(self, returns: torch.Tensor, valid: torch.Tensor) -> None:
        """The fold's future-return table ``[bars, H]`` and its mask (:func:`~foxhunt.learner.auxiliary.future_return_table`),
        copied into the tensors of the first call from then on (fixed addresses: a captured graph reads them)."""
        if returns.shape != valid.shape or returns.ndim != 2 or returns.shape[1] != self.horizon:
            raise ValueError(f"future returns and their mask must both be [bars, {self.horizon}], got "
                             f"{tuple(returns.shape)} and {tuple(valid.shape)}")
        dtype, device = self.rewards.dtype, self.rewards.device
        if self.future_table is None or self.future_table.shape != returns.shape:
            self.future_table = returns.to(device=device, dtype=dtype).clone()
            self.future_mask = valid.to(device=device, dtype=dtype).clone()
        else:
            self.future_table.copy_(returns)
            self.future_mask.copy_(valid)

    def _future(self, bar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(future_returns [B, H], future_valid [B, H])`` of the sampled bars ``bar [B]`` (-1: not stored)."""
        if self.future_table is None:  # fixed once the trainer sets the first fold: no data-dependent branch
            zeros = torch.zeros(bar.shape[0], self.horizon, device=bar.device, dtype=self.rewards.dtype)
            return zeros, zeros
        known = (bar >= 0).to(self.rewards.dtype)[:, None]
        index = torch.clamp(bar, min=0)
        return self.future_table[index] * known, self.future_mask[index] * known

    @torch.no_grad()
    def set_fold(self, fold: AugmentationFold) -> None:
        """The fold's constants for every augmentation; from here on sampling applies them. The fold's ``window``
        must be the replay's: the augmentations see the windowed observations it samples."""
        if fold.window != self.window:
            raise ValueError(f"the fold is for an encoder window of {fold.window} bars, but this replay samples "
                             f"windows of {self.window}: build the AugmentationFold with window={self.window}")
        self.augmentations.set_fold(fold)

    @torch.no_grad()
    def newest_inputs(self, limit: int) -> torch.Tensor:
        """The encoder inputs of the newest stored transitions, whole vector steps, at most ``limit`` rows (at
        least one step's): ``[N, input width]``, empty before the first ``add``. For epoch-boundary diagnostics:
        it reads the write counter on the host."""
        written = int(self.written)
        steps = min(written, self.rows, max(1, limit // self.n_envs))
        rows = torch.remainder(torch.arange(written - steps, written, device=self.obs.device), self.rows)
        obs = self.obs[rows].reshape(steps * self.n_envs, self.obs.shape[-1])  # 0 rows before the first add
        if self.window > 1:  # the windows, gathered as sampling gathers them
            obs = window_input(obs, self.bars[rows].reshape(-1), self.window_features, self.window)
        return obs

    # -- sampling --------------------------------------------------------------
    def filled(self) -> torch.Tensor:
        """``[rows, E]`` bool: slots holding a transition."""
        return (self.row_ids < self.written)[:, None].expand(self.rows, self.n_envs)

    def sampling_mass(self) -> torch.Tensor:
        """``[slots]`` float64 unnormalised sampling probability of every slot."""
        filled = self.filled().reshape(-1).to(torch.float64)
        if not self.config.prioritized:
            return filled
        mass = self.priorities.reshape(-1).to(torch.float64).pow(self.alpha.to(torch.float64)) * filled
        # all-zero mass (every priority 0): fall back to uniform over the filled slots, without a host branch
        return torch.where(mass.sum() > 0, mass, filled)

    def uniforms(self, batch_size: int) -> torch.Tensor:
        """The random draws of one batch: ``[B]`` float64 in [0, 1) from the learner's generator."""
        return torch.rand(batch_size, generator=self.generator, device=self.obs.device, dtype=torch.float64)

    @torch.no_grad()
    def sample_indices(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Stratified inverse-CDF draw: ``(indices [B] int64, importance weights [B], max 1)``."""
        return self.indices_at(self.uniforms(batch_size))

    @torch.no_grad()
    def indices_at(self, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`sample_indices` for given draws ``uniforms [B]`` in [0, 1) (one per stratum)."""
        batch_size = uniforms.shape[0]
        mass = self.sampling_mass()
        cdf = torch.cumsum(mass, 0)
        total = cdf[-1]
        strata = torch.arange(batch_size, device=cdf.device, dtype=torch.float64)
        u = strata + uniforms
        u = torch.minimum(u * (total / batch_size), torch.nextafter(total, torch.zeros_like(total)))
        indices = torch.searchsorted(cdf, u, right=True)
        probs = mass[indices] / total
        n_filled = torch.clamp(self.written, max=self.rows) * self.n_envs
        weights = (n_filled * probs).pow(-self.beta.to(torch.float64))
        weights = (weights / spread_max(weights)).to(self.rewards.dtype)
        return indices, weights

    def horizons(self, uniforms: torch.Tensor) -> torch.Tensor:
        """Each draw's return horizon ``[B]`` int64: ``n_step``, or with ``n_step_mix`` that or ``n_step_mix`` at even odds.

        The choice reads the draw's bits below its first twenty: the stratified draw places a sample by its leading
        bits (:meth:`indices_at`), so the low ones are independent of where it landed, and sampling keeps one random
        stream (what lets :meth:`sample_at` be compiled and replayed from a graph).
        """
        full = torch.full_like(uniforms, self.n_step, dtype=torch.int64)
        if not self.n_step_mix:  # fixed for the run
            return full
        short = torch.frac(uniforms * float(1 << 20)) < 0.5
        return torch.where(short, torch.full_like(full, self.n_step_mix), full)

    @torch.no_grad()
    def sample(self, batch_size: int, gamma: torch.Tensor) -> Batch:
        """Draw ``batch_size`` transitions with n-step returns under the per-branch discount ``gamma [Branch]``."""
        return self.sample_at(self.uniforms(batch_size), gamma)

    @torch.no_grad()
    def sample_at(self, uniforms: torch.Tensor, gamma: torch.Tensor) -> Batch:
        """:meth:`sample` for given draws ``uniforms [B]``: no randomness of its own, so it can be compiled."""
        batch_size = uniforms.shape[0]
        indices, weights = self.indices_at(uniforms)
        row = torch.div(indices, self.n_envs, rounding_mode="floor")
        env = torch.remainder(indices, self.n_envs)
        newest = torch.remainder(self.written - 1, self.rows)
        ahead = torch.remainder(newest - row, self.rows)  # steps written after this one
        gamma = gamma.to(self.rewards.dtype)
        returns = torch.zeros(batch_size, len(Branch), device=row.device, dtype=self.rewards.dtype)
        alive = torch.ones(batch_size, device=row.device, dtype=self.rewards.dtype)
        length = torch.zeros(batch_size, device=row.device, dtype=torch.int64)
        horizon = self.horizons(uniforms) if self.n_step_mix else None  # fixed for the run: the default adds nothing
        for k in range(self.n_step):  # n_step is fixed for the run: a static unroll
            r_k = torch.remainder(row + k, self.rows)
            within = ahead >= k if horizon is None else (ahead >= k) & (horizon > k)
            included = alive * within.to(alive.dtype)
            if self.reward_split:  # fixed for the run
                step = branch_rewards(self.rewards[r_k, env] * included, self.executions[r_k, env] * included,
                                      self.execution_columns)
            else:
                step = (self.rewards[r_k, env] * included)[:, None]
            returns = returns + (gamma**k)[None, :] * step
            length = length + included.to(torch.int64)
            alive = included * (1.0 - self.dones[r_k, env])
        last = torch.remainder(row + length - 1, self.rows)
        terminal = self.dones[last, env]
        discounts = gamma[None, :] ** length[:, None].to(gamma.dtype) * (1.0 - terminal)[:, None]
        obs, next_obs = self.obs[row, env], self.next_obs[last, env]
        if self.window > 1:  # fixed for the run: the encoder inputs, gathered from the fold's feature matrix
            if self.window_features is None:
                raise ValueError("this replay rebuilds encoder windows but has no feature matrix: call set_features")
            obs = window_input(obs, self.bars[row, env], self.window_features, self.window)
            next_obs = window_input(next_obs, self.next_bars[last, env], self.window_features, self.window)
        future_returns = future_valid = None
        if self.horizon > 0:  # fixed for the run
            future_returns, future_valid = self._future(self.bars[row, env])
        batch = Batch(
            obs=obs,
            actions=self.actions[row, env],
            returns=returns,
            discounts=discounts,
            next_obs=next_obs,
            weights=weights,
            indices=indices,
            future_returns=future_returns,
            future_valid=future_valid,
        )
        if not self.augmentations.active:  # fixed from the first fold on: no data-dependent branch
            return batch
        return self.augmentations.apply(batch, self.rewards[row, env])
