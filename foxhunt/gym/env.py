"""``FoxhuntEnv``: one futures-trading episode at a time, as a plain ``gymnasium.Env``.

It is :class:`~foxhunt.gym.vector.FoxhuntVectorEnv` with one environment and
autoreset disabled: ``step`` returns the episode's last observation when it
ends, and the caller starts the next with ``reset()``, as every single-env
trainer expects. Observations are float32 arrays, rewards Python floats,
``info`` the environment's ``position``, ``equity``, ``cost`` and ``bar``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from foxhunt.config import FoxhuntConfig
from foxhunt.data.market import MarketData
from foxhunt.gym.market import GymMarket
from foxhunt.gym.vector import FoxhuntVectorEnv

__all__ = ["FoxhuntEnv"]


class FoxhuntEnv(gymnasium.Env):
    """A single futures-trading environment; the arguments are those of :class:`FoxhuntVectorEnv`."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        data: str | MarketData | None = None,
        *,
        config: FoxhuntConfig | str | Path | None = None,
        overrides: Sequence[str] = (),
        fold: int = 0,
        window: str = "train",
        seed: int | None = None,
        device: torch.device | str = "cpu",
        render_mode: str | None = None,
    ) -> None:
        self.vector = FoxhuntVectorEnv(
            1, data, config=config, overrides=overrides, fold=fold, window=window, seed=seed, device=device,
            autoreset_mode=AutoresetMode.DISABLED, render_mode=render_mode,
        )
        self.render_mode = None
        self.action_space = self.vector.single_action_space
        self.observation_space = self.vector.single_observation_space

    @property
    def market(self) -> GymMarket:
        """The bars, normalised features and window this environment trades."""
        return self.vector.market

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode (``seed`` re-keys the stream its start bar is drawn from)."""
        if options:
            raise ValueError(f"FoxhuntEnv.reset takes no options, got {sorted(options)}")
        super().reset(seed=seed)
        obs, infos = self.vector.reset(seed=seed)
        return obs[0], self._info(infos)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply ``action`` (four sub-action indices, ``action_space``) and advance one bar."""
        batch = action if isinstance(action, torch.Tensor) else np.asarray(action)
        if tuple(batch.shape) != self.action_space.shape:
            raise ValueError(
                f"action must have shape {self.action_space.shape} (one index per branch: direction, magnitude, "
                f"order type, urgency), got {tuple(batch.shape)}"
            )
        batch = batch[None]
        obs, rewards, terminations, truncations, infos = self.vector.step(batch)
        return obs[0], float(rewards[0]), bool(terminations[0]), bool(truncations[0]), self._info(infos)

    @staticmethod
    def _info(infos: dict[str, Any]) -> dict[str, Any]:
        return {key: value[0].item() for key, value in infos.items() if not key.startswith("_")}

    def close(self) -> None:
        self.vector.close()
