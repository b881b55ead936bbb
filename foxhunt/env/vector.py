"""N parallel futures-trading episodes advanced by one kernel launch per step.

All buffers are allocated once, here; ``step`` copies the actions into the
action buffer and launches the step kernel, which writes the next
observation, reward and done flag in place. Nothing in ``step`` reads a value
back to the host, so the call can be captured in a CUDA graph (keep the
returned tensors: they are the same objects every step).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from foxhunt import contract
from foxhunt.actions import Branch
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.env.config import EnvConfig, physics_params
from foxhunt.env.kernel import run_env_reset, run_env_step
from foxhunt.env.tables import EP, OHLCV, PLAN, PS, RNG, PortfolioObs
from foxhunt.kernels.backend import Backend, resolve_backend
from foxhunt.kernels.context import KernelContext
from foxhunt.kernels.rng import MASK32, hash3
from foxhunt.state_loading import load_in_place

__all__ = ["VectorEnv", "env_keys", "env_major", "KEY_LANE"]

KEY_LANE = 1  # lane of the hash that derives each environment's stream key from the seed


def env_keys(seed: int, n_envs: int) -> np.ndarray:
    """Per-environment stream keys derived from ``seed`` (int64 ``[n_envs]``)."""
    index = np.arange(n_envs, dtype=np.int64)
    high_word = ((seed >> 32) & MASK32) ^ KEY_LANE
    return hash3(np.int64(seed & MASK32), index, np.int64(high_word)).astype(np.int64)


def env_major(n_envs: int, width: int, dtype: torch.dtype, device: torch.device, *, by_column: bool) -> torch.Tensor:
    """Zeros of shape ``[n_envs, width]``, stored column by column (strides ``(1, n_envs)``) when ``by_column``.

    The kernels give each environment one thread (CUDA) or one loop index (CPU)
    and read ``buffer[i, field]``. On a GPU, stored row by row, the 32 threads
    of a warp reading one field touch 32 rows ``width`` elements apart: 32
    memory sectors for 128 useful bytes. Stored column by column they read 32
    neighbouring elements, one coalesced access; the step kernel ran 2.4× (65,536
    environments) to 4× (a million) faster on an H200 (docs/kernels.md). A CPU
    core walks its own range of environments, where rows are what its caches
    and prefetcher want: column by column, each environment touches one cache
    line per field, and the step ran about 2.5× slower at 65,536 environments.
    Every torch operation sees the same ``[n_envs, width]`` tensor either way.
    """
    if by_column:
        return torch.zeros((width, n_envs), dtype=dtype, device=device).t()
    return torch.zeros((n_envs, width), dtype=dtype, device=device)


def _as_tensor(value: np.ndarray | torch.Tensor, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        value = value.copy()  # torch cannot wrap read-only memory (market arrays are frozen on purpose)
    tensor = torch.as_tensor(value)
    return tensor.to(device=device, dtype=dtype).contiguous()


class VectorEnv:
    """``config.n_envs`` episodes over ``prices`` (``[bars, OHLCV]``, OHLC at least) and ``features`` (``[bars, F]``).

    ``window=(start, end)`` limits episodes to bars ``start .. end-1`` (the
    training window); each episode starts at a random bar of it (counter-based
    draw, so ``seed`` fixes every start) unless ``random_start`` is off.
    ``health`` is a one-element device tensor read by the Kelly safety
    multiplier at every step (e.g. a view of the ISV's learning-health slot);
    without one the environment uses its own tensor holding 1.0.
    ``step_kernel``/``reset_kernel`` take a :class:`KernelContext`; the defaults
    launch :data:`foxhunt.env.kernel.ENV_STEP` / ``ENV_RESET``, which is also
    what the ``market_env`` plugin's kernel record runs. ``isv`` and ``layout``
    (the run's ISV buffer and its layout) go into that context: with the
    trade_plans plugin's slots in it, the step honours trade plans, whose rows
    are ``plan [envs, PLAN]`` (:mod:`foxhunt.env.plans`).
    """

    def __init__(
        self,
        prices: np.ndarray | torch.Tensor,
        features: np.ndarray | torch.Tensor,
        instrument: InstrumentSpec,
        config: EnvConfig,
        *,
        window: tuple[int, int] | None = None,
        seed: int = 0,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        backend: Backend | str | None = None,
        health: torch.Tensor | None = None,
        random_start: bool = True,
        auto_reset: bool = True,
        execution_part: bool = False,
        step_kernel: Callable[[KernelContext], None] | None = None,
        reset_kernel: Callable[[KernelContext], None] | None = None,
        isv: torch.Tensor | None = None,
        layout: object | None = None,
    ) -> None:
        # Resolve "cuda" to "cuda:N" so device comparisons with given tensors are exact.
        self.device = torch.empty(0, device=device).device
        self.backend = resolve_backend(self.device, backend)
        self.config = config
        self.instrument = instrument
        self.dtype = dtype
        self.prices = _as_tensor(prices, dtype, self.device)
        self.features = _as_tensor(features, torch.float32, self.device)
        if self.prices.ndim != 2 or self.prices.shape[1] < OHLCV.CLOSE + 1:
            raise ValueError(f"prices must be [bars, OHLC(V)], got shape {tuple(self.prices.shape)}")
        if self.features.ndim != 2 or self.features.shape[0] != self.prices.shape[0]:
            raise ValueError(
                f"features must be [bars, F] with one row per price bar: prices have {self.prices.shape[0]} bars, "
                f"features shape {tuple(self.features.shape)}"
            )
        self.n_bars = int(self.prices.shape[0])
        window = (0, self.n_bars) if window is None else (int(window[0]), int(window[1]))
        self._check_window(window)
        self.window = window
        self.params = _as_tensor(
            physics_params(config, instrument, window, random_start=random_start, auto_reset=auto_reset,
                           execution_part=execution_part),
            dtype,
            self.device,
        )
        n = config.n_envs
        by_column = self.backend is not Backend.CPU  # CUDA, and the simulator so that CPU tests run that layout
        self.state = env_major(n, PS.size(), dtype, self.device, by_column=by_column)
        self.rng = env_major(n, RNG.size(), torch.int64, self.device, by_column=by_column)
        self.rng[:, RNG.KEY] = torch.from_numpy(env_keys(seed, n)).to(self.device)
        self.actions = env_major(n, Branch.size(), torch.int64, self.device, by_column=by_column)
        if health is None:
            health = torch.ones(1, dtype=torch.float32, device=self.device)
        if health.numel() != 1 or health.device != self.device:
            raise ValueError(f"health must be a one-element tensor on {self.device}, got {tuple(health.shape)} on {health.device}")
        self.health = health.reshape(1)
        self.obs = env_major(n, self.observation_size, torch.float32, self.device, by_column=by_column)
        self.plan = env_major(n, PLAN.size(), dtype, self.device, by_column=by_column)
        if isv is not None and isv.device != self.device:
            raise ValueError(f"isv must be on {self.device}, got {isv.device}")
        self.reward = torch.zeros(n, dtype=dtype, device=self.device)
        self.done = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.context = KernelContext(
            device=self.device,
            backend=self.backend,
            isv=isv,
            layout=layout if isv is not None else None,
            signals={
                contract.ENV_PRICES: self.prices,
                contract.ENV_FEATURES: self.features,
                contract.ENV_STATE: self.state,
                contract.ENV_RNG: self.rng,
                contract.ENV_ACTIONS: self.actions,
                contract.ENV_PARAMS: self.params,
                contract.ENV_HEALTH: self.health,
                contract.ENV_OBS: self.obs,
                contract.ENV_REWARD: self.reward,
                contract.ENV_DONE: self.done,
                contract.ENV_PLAN: self.plan,
            },
        )
        self._step_kernel = step_kernel or run_env_step
        self._reset_kernel = reset_kernel or run_env_reset

    def _check_window(self, window: tuple[int, int]) -> None:
        start, end = window
        if not 0 <= start < end <= self.n_bars or end - start < 2:
            raise ValueError(f"window {window} must satisfy 0 <= start, start + 2 <= end <= {self.n_bars} (bars)")

    @property
    def n_envs(self) -> int:
        return int(self.state.shape[0])

    @property
    def n_features(self) -> int:
        """Market features per observation (the portfolio features follow them)."""
        return int(self.features.shape[1])

    @property
    def observation_size(self) -> int:
        return self.n_features + PortfolioObs.size()

    def portfolio_obs_index(self, field: PortfolioObs) -> int:
        """Column of portfolio feature ``field`` in an observation."""
        return self.n_features + int(field)

    def set_window(self, start: int, end: int) -> None:
        """Move episodes to bars ``start .. end-1`` (new fold); takes effect at each environment's next reset."""
        self._check_window((start, end))
        self.window = (start, end)
        self.params[EP.WINDOW_START] = start
        self.params[EP.WINDOW_END] = end

    def reset(self) -> torch.Tensor:
        """Start a new episode in every environment; returns the observation buffer ``[envs, obs]``."""
        self.plan.zero_()  # no plan survives an episode (the step clears one when an episode ends inside it)
        self._reset_kernel(self.context)
        return self.obs

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Apply ``actions`` (``[envs, Branch]`` int) and advance one bar.

        Returns the preallocated ``(obs [envs, obs], reward [envs], done [envs])``
        buffers. A finished episode restarts inside the same launch (its ``obs``
        is already the new episode's first observation) unless ``auto_reset``
        is off, in which case it stays finished until :meth:`reset`.
        """
        if actions is not self.actions:
            self.actions.copy_(actions)
        self._step_kernel(self.context)
        return self.obs, self.reward, self.done

    # -- resumable state ---------------------------------------------------------------
    def state_dict(self) -> dict[str, torch.Tensor]:
        """The buffers a resumed run continues from (live, not copies): every episode's portfolio and position
        in it (``state``), its random stream (``rng``), the observation the policy acts on next (``obs``), the
        physics parameters with the window (``params``) and its trade plan (``plan``, all 0 without the
        trade_plans plugin). Actions, reward and done are not among them: every step writes them before anything
        reads them."""
        return {"state": self.state, "rng": self.rng, "obs": self.obs, "params": self.params, "plan": self.plan}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Copy :meth:`state_dict` output into the buffers in place (a captured graph and the kernel context
        keep their addresses); every name, shape and dtype is checked before the first copy."""
        load_in_place(self.state_dict(), state, "environment state",
                      "it was saved with another number of environments or another physics")
