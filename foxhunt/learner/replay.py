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

With ``mirror`` on, a share ``mirror_fraction`` of a sampled batch (at the
default 0.5 every odd position: the strata alternate, so the mirrored half is
spread over the whole buffer) is replaced by its counterfactual mirror: observations through the per-column
affine map set by :meth:`Replay.set_mirror` for the fold, SHORT and LONG
swapped; rewards and discounts are those of the original (foxhunt/env/mirror.py
says why). Its priority update goes to the original's slot. A replay whose
map was never set (filled outside the trainer) does not mirror.

With an encoder window W > 1 (``window``), each transition also stores the bar
index of its observation and of its next observation (``bars``/``next_bars``,
``[rows, E]`` int64) instead of W copies of the features: sampling rebuilds
both encoder inputs ``[B, W × F + P]`` by gathering the W - 1 earlier rows
from the fold's feature matrix (:meth:`Replay.set_features`,
:func:`foxhunt.learner.encoders.window_input`), before the mirror, whose map
covers every row of the window.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from foxhunt.actions import BRANCH_TABLES, Branch, Direction
from foxhunt.learner.config import ReplayConfig
from foxhunt.learner.encoders import window_input

__all__ = ["Batch", "Replay"]


@dataclasses.dataclass(frozen=True)  # not attrs.frozen: torch.compile traces dataclass construction
class Batch:
    """A sampled batch. B = batch size, D = observation width (the encoder input's, W × F + P, with a window).

    ``obs``/``next_obs`` ``[B, D]`` (``next_obs`` is the bootstrap observation m
    steps later); ``actions`` ``[B, Branch]`` int64; ``returns`` ``[B, Branch]``
    discounted m-step rewards; ``discounts`` ``[B, Branch]`` = γ_b^m, zero when the
    episode ended inside the window; ``weights`` ``[B]`` importance weights
    (max 1); ``indices`` ``[B]`` flat slot indices for priority updates.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    returns: torch.Tensor
    discounts: torch.Tensor
    next_obs: torch.Tensor
    weights: torch.Tensor
    indices: torch.Tensor


class Replay(nn.Module):
    """Ring buffer of ``rows = capacity // n_envs`` time steps for ``n_envs`` environments (all buffers)."""

    def __init__(self, config: ReplayConfig, obs_dim: int, n_envs: int, n_step: int,
                 device: torch.device | str, generator: torch.Generator, dtype: torch.dtype = torch.float32,
                 *, window: int = 1, n_features: int = 0) -> None:
        super().__init__()
        rows = config.capacity // n_envs
        if rows < n_step + 1:
            raise ValueError(
                f"replay capacity {config.capacity} holds {rows} steps of {n_envs} environments; it needs at least "
                f"n_step + 1 = {n_step + 1} steps: raise [learner.replay] capacity or lower n_step"
            )
        self.config = config
        self.rows, self.n_envs, self.n_step, self.obs_dim = rows, n_envs, n_step, obs_dim
        self.slots = rows * n_envs
        self.generator = generator
        kw = {"device": device}
        self.register_buffer("obs", torch.zeros(rows, n_envs, obs_dim, dtype=dtype, **kw))
        self.register_buffer("next_obs", torch.zeros(rows, n_envs, obs_dim, dtype=dtype, **kw))
        self.register_buffer("actions", torch.zeros(rows, n_envs, len(Branch), dtype=torch.int64, **kw))
        self.register_buffer("rewards", torch.zeros(rows, n_envs, dtype=dtype, **kw))
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
        if window > 1:
            self.register_buffer("bars", torch.zeros(rows, n_envs, dtype=torch.int64, **kw))
            self.register_buffer("next_bars", torch.zeros(rows, n_envs, dtype=torch.int64, **kw))
        input_dim = obs_dim + (window - 1) * n_features  # what a sampled batch's obs is: the encoder input
        # the counterfactual mirror: obs' = clamp(obs * scale + shift, low, high); off until set_mirror gives the
        # map (a replay filled outside the trainer has no normaliser to build it from)
        self.mirroring = False
        self.register_buffer("mirror_scale", torch.ones(input_dim, dtype=dtype, **kw), persistent=False)
        self.register_buffer("mirror_shift", torch.zeros(input_dim, dtype=dtype, **kw), persistent=False)
        self.register_buffer("mirror_low", torch.full((input_dim,), -torch.inf, dtype=dtype, **kw), persistent=False)
        self.register_buffer("mirror_high", torch.full((input_dim,), torch.inf, dtype=dtype, **kw), persistent=False)
        # the action map: SHORT <-> LONG in the direction column, every other code and column unchanged
        swapped = {Direction.SHORT: Direction.LONG, Direction.LONG: Direction.SHORT}
        codes = max(table.size() for table in BRANCH_TABLES.values())
        self.register_buffer("mirror_codes", torch.tensor([swapped.get(code, code) for code in range(codes)], **kw),
                             persistent=False)
        self.register_buffer("mirror_columns", torch.arange(len(Branch), **kw) == Branch.DIRECTION, persistent=False)

    # -- writing ---------------------------------------------------------------
    @torch.no_grad()
    def add(self, obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, next_obs: torch.Tensor,
            dones: torch.Tensor, bars: torch.Tensor | None = None, next_bars: torch.Tensor | None = None) -> None:
        """Append one step of every environment: ``obs``/``next_obs`` ``[E, D]``, ``actions`` ``[E, Branch]``,
        ``rewards``/``dones`` ``[E]``; with an encoder window, ``bars``/``next_bars`` ``[E]``: the bar index of
        ``obs`` and of ``next_obs`` (ignored for W = 1). New transitions get the largest priority seen so far."""
        row = torch.remainder(self.written, self.rows).view(1)
        self.obs.index_copy_(0, row, obs.to(self.obs.dtype).unsqueeze(0))
        self.next_obs.index_copy_(0, row, next_obs.to(self.obs.dtype).unsqueeze(0))
        self.actions.index_copy_(0, row, actions.to(torch.int64).unsqueeze(0))
        self.rewards.index_copy_(0, row, rewards.to(self.rewards.dtype).unsqueeze(0))
        self.dones.index_copy_(0, row, dones.to(self.dones.dtype).unsqueeze(0))
        self.priorities.index_copy_(0, row, self.max_priority.expand(1, self.n_envs))
        if self.window > 1:
            if bars is None or next_bars is None:
                raise ValueError(f"this replay rebuilds encoder windows of {self.window} bars: add() needs the bar "
                                 "index of obs and next_obs (bars=, next_bars=)")
            self.bars.index_copy_(0, row, bars.to(torch.int64).unsqueeze(0))
            self.next_bars.index_copy_(0, row, next_bars.to(torch.int64).unsqueeze(0))
        self.written.add_(1)

    @torch.no_grad()
    def update_priorities(self, indices: torch.Tensor, td_error: torch.Tensor) -> None:
        """Set the priorities of sampled slots from their raw TD error ``[B]`` (|δ| + eps; α applies at sampling).

        A slot drawn more than once in a batch takes the largest of its priorities. With the mirror its copies
        have different TD errors (the original and its mirror), and a plain indexed write would keep whichever
        the device happened to write last: on CUDA a graph replay and an eager run then part ways."""
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
        if self.window > 1:
            self.bars.zero_()
            self.next_bars.zero_()
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
    def set_mirror(self, scale: torch.Tensor, shift: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> None:
        """The fold's observation mirror, per column ``[D]``; from here on sampling mirrors when ``mirror`` is on.
        With an encoder window, each earlier feature row of the window is mirrored like the observation's own."""
        self.mirroring = self.config.mirror
        history = self.window - 1
        for buffer, value in ((self.mirror_scale, scale), (self.mirror_shift, shift), (self.mirror_low, low),
                              (self.mirror_high, high)):
            value = torch.as_tensor(value, dtype=buffer.dtype)
            value = torch.cat([value[:self.n_features].repeat(history), value]) if history else value
            buffer.copy_(value)

    def _mirrored(self, obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Odd positions of the batch replaced by their mirror: observations mapped, SHORT and LONG swapped."""
        # position i is mirrored when i × fraction crosses an integer: evenly spread, the odd positions at 0.5
        position = torch.arange(obs.shape[0] + 1, device=obs.device, dtype=torch.float64)
        crossed = torch.floor(position * self.config.mirror_fraction)
        flip = (crossed[1:] > crossed[:-1])[:, None]

        def mirror(x: torch.Tensor) -> torch.Tensor:
            return torch.where(flip, torch.clamp(x * self.mirror_scale + self.mirror_shift, self.mirror_low,
                                                 self.mirror_high), x)

        actions = torch.where(flip & self.mirror_columns[None, :], self.mirror_codes[actions], actions)
        return mirror(obs), actions, mirror(next_obs)

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
        weights = (weights / weights.max()).to(self.rewards.dtype)
        return indices, weights

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
        for k in range(self.n_step):  # n_step is fixed for the run: a static unroll
            r_k = torch.remainder(row + k, self.rows)
            included = alive * (ahead >= k).to(alive.dtype)
            returns = returns + (gamma**k)[None, :] * (self.rewards[r_k, env] * included)[:, None]
            length = length + included.to(torch.int64)
            alive = included * (1.0 - self.dones[r_k, env])
        last = torch.remainder(row + length - 1, self.rows)
        terminal = self.dones[last, env]
        discounts = gamma[None, :] ** length[:, None].to(gamma.dtype) * (1.0 - terminal)[:, None]
        obs, actions, next_obs = self.obs[row, env], self.actions[row, env], self.next_obs[last, env]
        if self.window > 1:  # fixed for the run: the encoder inputs, gathered from the fold's feature matrix
            if self.window_features is None:
                raise ValueError("this replay rebuilds encoder windows but has no feature matrix: call set_features")
            obs = window_input(obs, self.bars[row, env], self.window_features, self.window)
            next_obs = window_input(next_obs, self.next_bars[last, env], self.window_features, self.window)
        if self.mirroring:  # fixed from the first fold on: no data-dependent branch
            obs, actions, next_obs = self._mirrored(obs, actions, next_obs)
        return Batch(
            obs=obs,
            actions=actions,
            returns=returns,
            discounts=discounts,
            next_obs=next_obs,
            weights=weights,
            indices=indices,
        )
