"""``FoxhuntVectorEnv``: foxhunt's vectorised futures environment behind Gymnasium's ``VectorEnv`` API.

It steps a :class:`foxhunt.env.VectorEnv` (the same kernel, fill model, costs,
caps and reward as ``foxhunt train``) over the features the trainer builds
(:mod:`foxhunt.gym.market`), and speaks Gymnasium 1.x:
``reset(seed=, options=) -> (obs, infos)`` and
``step(actions) -> (obs, rewards, terminations, truncations, infos)``.

Episodes end in three ways: bankruptcy (equity at or below zero) is a
*termination*; reaching ``env.episode_bars`` or the window's last bar is a
*truncation* (the market goes on; bootstrap from ``final_obs``).

Autoreset (``metadata["autoreset_mode"]``):

- ``SAME_STEP`` (default, what the trainer's env does): a finished environment
  starts its next episode inside the same ``step``; its row of ``obs`` is the new
  episode's first observation, and ``infos["final_obs"]`` / ``infos["final_info"]``
  (masked by ``infos["_final_obs"]`` / ``infos["_final_info"]``) hold the last
  one. The new episode is exactly what foxhunt's own auto-reset would start
  (same start bar from the same counter-based stream).
- ``DISABLED``: a finished environment stays finished (reward 0) until
  ``reset(options={"reset_mask": mask})`` restarts the environments in ``mask``.

Outputs are NumPy arrays (observations float32, rewards float64, flags bool),
fresh on every call, wherever the physics runs (``device="cpu"``, ``"cuda"``,
``"auto"``). ``tensors=True`` returns torch tensors on the device instead
(rewards in the env's dtype, float32; ``infos["final_obs"]`` a whole
``[num_envs, obs]`` tensor, valid where ``infos["_final_obs"]``) and accepts
actions as a tensor there, with no copy through the host. Each ``step`` reads
two flags back to the host (an action out of range, an episode finished), so
it is a Gymnasium-speed path; ``foxhunt train`` keeps its own step free of
host synchronisation.

``infos`` carries, per environment, ``position`` (signed contracts), ``equity``
(money), ``cost`` (costs paid by the last step, money) and ``bar`` (the market
bar index the observation was taken at), each with its ``_key`` mask.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv as GymnasiumVectorEnv
from gymnasium.vector.utils import batch_space

from foxhunt.config import FoxhuntConfig
from foxhunt.data.market import MarketData
from foxhunt.env.tables import PS, RNG
from foxhunt.env.vector import VectorEnv, env_keys
from foxhunt.gym.market import GymMarket, prepare_market, resolve_config
from foxhunt.gym.spaces import action_space, checked_actions, observation_space
from foxhunt.trainer.trainer import resolve_device

__all__ = ["FoxhuntVectorEnv", "AUTORESET_MODES"]

AUTORESET_MODES = (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)
_INFO_FIELDS = {"position": PS.POSITION, "equity": PS.EQUITY, "cost": PS.STEP_COST, "bar": PS.BAR}


class FoxhuntVectorEnv(GymnasiumVectorEnv):
    """``num_envs`` futures-trading episodes over a market, as a Gymnasium vector env.

    ``data``: a source string like the CLI's ``--data`` (``"synthetic:ar1?bars=2000&seed=1"``, a bundled
    dataset name, a file path) or a :class:`MarketData`; None takes ``[data] source`` from the config.
    ``config``: a :class:`FoxhuntConfig`, a TOML path, or None for the defaults; ``overrides`` are
    ``--set``-style ``"section.key=value"`` strings applied to the file or the defaults. The config's
    ``[features]`` and ``[folds]`` decide the observations, ``[env]`` the physics (``n_envs`` becomes
    ``num_envs``). Episodes run in fold ``fold``'s ``window`` ("train", "validation" or "test"), with
    features normalised on that fold's training bars, as the trainer does. ``seed`` (default
    ``[run] seed``) keys each environment's stream of episode start bars; ``reset(seed=...)`` re-keys it.
    Nothing is drawn: a ``render_mode`` is ignored with a warning.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 1,
        data: str | MarketData | None = None,
        *,
        config: FoxhuntConfig | str | Path | None = None,
        overrides: Sequence[str] = (),
        fold: int = 0,
        window: str = "train",
        seed: int | None = None,
        device: torch.device | str = "cpu",
        tensors: bool = False,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None:
            # Trainers ask for one by default (stable-baselines3's make_vec_env asks for "rgb_array"): going on
            # without frames serves them better than refusing to start.
            warnings.warn(f"foxhunt envs draw nothing; render_mode={render_mode!r} is ignored", UserWarning,
                          stacklevel=2)
        mode = AutoresetMode(autoreset_mode)
        if mode not in AUTORESET_MODES:
            raise ValueError(f"autoreset_mode must be one of {[m.value for m in AUTORESET_MODES]}, got {mode.value!r}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        resolved = resolve_config(config, data, overrides)
        self.market: GymMarket = prepare_market(
            resolved, data if isinstance(data, MarketData) else None, fold=fold, window=window
        )
        self.seed = resolved.run.seed if seed is None else int(seed)
        market = self.market.market
        self.core = VectorEnv(
            market.ohlcv, self.market.features, market.instrument, attrs.evolve(resolved.env, n_envs=int(num_envs)),
            window=self.market.window, seed=self.seed, device=resolve_device(str(device)), auto_reset=False,
        )
        self.device = self.core.device
        self.tensors = bool(tensors)
        self.num_envs = int(num_envs)
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.render_mode = None
        self.single_action_space = action_space()
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.single_observation_space = observation_space(self.core.observation_size)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self._started = False

    @property
    def autoreset_mode(self) -> AutoresetMode:
        return self.metadata["autoreset_mode"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start new episodes: every environment, or those in ``options["reset_mask"]`` (bool ``[num_envs]``).

        ``seed`` re-keys the start-bar streams of the environments reset (the same keys as
        ``foxhunt.env.VectorEnv(seed=seed)``); without it they continue, so each reset draws new starts.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
            raise TypeError(f"seed must be an int or None (one seed keys every environment), got {seed!r}")
        mask = self._reset_mask(options)
        every = bool(mask.all())
        if not every and not self._started:
            raise RuntimeError("the first reset() must start every environment: call it without reset_mask")
        super().reset(seed=seed)  # seeds self.np_random, and refuses a negative seed
        if seed is not None:
            keys = torch.from_numpy(env_keys(int(seed), self.num_envs)).to(self.device)
            rng = self.core.rng
            rng[:, RNG.KEY] = torch.where(mask, keys, rng[:, RNG.KEY])
            rng[:, RNG.COUNTER] = torch.where(mask, torch.zeros_like(keys), rng[:, RNG.COUNTER])
        if every:
            self.core.reset()
        else:
            self._reset_rows(mask)
        self._started = True
        return self._out(self.core.obs), self._infos(mask)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Apply ``actions`` (``[num_envs, 4]`` sub-action indices, ``action_space``) and advance one bar."""
        if not self._started:
            raise RuntimeError("call reset() before step(): the environments have no episode yet")
        batch = checked_actions(actions, self.num_envs, self.device)
        obs, reward, done = self.core.step(batch)
        terminated = done & (self.core.state[:, PS.EQUITY] <= 0.0)
        truncated = done & ~terminated
        rewards = reward.clone() if self.tensors else reward.detach().cpu().numpy().astype(np.float64)
        everyone = torch.ones_like(done)
        infos = self._infos(everyone)
        if self.autoreset_mode is AutoresetMode.SAME_STEP and bool(done.any()):
            finished = done.clone()
            final_obs = obs.clone()
            final_info = infos
            self._reset_rows(finished)
            infos = self._infos(everyone)
            infos["final_info"] = self._infos(finished, final_info)
            infos["_final_info"] = self._out(finished)
            infos["final_obs"] = self._final_obs(final_obs, finished)
            infos["_final_obs"] = self._out(finished)
        return self._out(self.core.obs), rewards, self._out(terminated), self._out(truncated), infos

    # -- internals ---------------------------------------------------------------------
    def _reset_mask(self, options: dict[str, Any] | None) -> torch.Tensor:
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; the one option is 'reset_mask'")
        if mask is None:
            return torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        mask = torch.as_tensor(mask, device=self.device)
        if mask.dtype != torch.bool or tuple(mask.shape) != (self.num_envs,):
            raise ValueError(f"reset_mask must be booleans of shape ({self.num_envs},), got {mask.dtype} {tuple(mask.shape)}")
        return mask

    def _reset_rows(self, mask: torch.Tensor) -> None:
        """Start new episodes in the environments of ``mask`` only; the others are left exactly as they were.

        The reset kernel starts every environment, so the rows outside ``mask`` are restored afterwards; a row
        inside gets what foxhunt's in-kernel auto-reset would give it (one draw from its own stream).
        """
        core = self.core
        buffers = (core.state, core.rng, core.obs, core.done)
        saved = [buffer.clone() for buffer in buffers]
        core.reset()
        keep = ~mask
        for buffer, old in zip(buffers, saved, strict=True):
            rows = keep.reshape(-1, *([1] * (buffer.ndim - 1)))
            buffer.copy_(torch.where(rows, old, buffer))

    def _out(self, tensor: torch.Tensor) -> Any:
        """A fresh copy for the caller: a tensor on the device, or a C-ordered NumPy array."""
        if self.tensors:
            return tensor.clone()
        return np.array(tensor.detach().cpu().numpy(), copy=True, order="C")

    def _infos(self, mask: torch.Tensor, values: dict[str, Any] | None = None) -> dict[str, Any]:
        """Portfolio figures per environment (from ``values``, else read now) with ``_key`` masks ``mask``."""
        state = self.core.state
        infos: dict[str, Any] = {}
        for key, field in _INFO_FIELDS.items():
            if values is not None:
                infos[key] = values[key]
            else:
                column = state[:, field]
                infos[key] = self._out(column.to(torch.int64) if key == "bar" else column.to(torch.float64))
            infos[f"_{key}"] = self._out(mask)
        return infos

    def _final_obs(self, obs: torch.Tensor, finished: torch.Tensor) -> Any:
        if self.tensors:
            return obs
        rows = np.full(self.num_envs, None, dtype=object)
        values = self._out(obs)
        for env in np.flatnonzero(self._out(finished)):
            rows[env] = values[env].copy()
        return rows
