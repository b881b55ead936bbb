"""Exploration per action branch, as torch functions driven by a counter-based generator.

Every draw is ``hash3(key, counter, lane)`` (see :mod:`foxhunt.kernels.rng`):
``key`` is fixed per branch and purpose, ``lane`` is the element index, and
``counter`` is a one-element int64 device tensor that :class:`BranchExplorer`
advances in place after each call. Nothing is read back to the host, no Python
number changes between steps, and a captured CUDA graph draws new numbers at
every replay. ``epsilon`` and ``temperature`` may be Python floats
(constants) or device tensors (0-d, or ``[Branch]`` for one value per branch,
e.g. a view of the ISV).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from foxhunt.actions import Branch
from foxhunt.kernels.rng import MASK32, hash3, mix32, uniform01
from foxhunt.state_loading import load_in_place

__all__ = [
    "counter_uniform",
    "epsilon_greedy",
    "boltzmann",
    "BranchExplorer",
]

# Draw purposes: each gets its own key, so the streams never overlap.
_EPSILON_GREEDY, _BOLTZMANN = range(2)
_PURPOSES = (_EPSILON_GREEDY, _BOLTZMANN)
# A purpose's key mixes in ``branch * _KEY_STRIDE + purpose``; the stride is part of every seeded run's draws
# (changing it changes the actions of every seed), so it stays 3 whatever the number of purposes.
_KEY_STRIDE = 3


def counter_uniform(key: int, counter: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    """Uniform float32 in [0, 1), one per lane, for this value of ``counter``."""
    return uniform01(hash3(key, counter, lanes)).to(torch.float32)


def _branch_value(value: float | torch.Tensor, branch: int) -> float | torch.Tensor:
    if isinstance(value, torch.Tensor) and value.ndim == 1:
        return value[branch]
    return value


def epsilon_greedy(
    q: torch.Tensor, epsilon: float | torch.Tensor, key: int, counter: torch.Tensor, lanes: torch.Tensor
) -> torch.Tensor:
    """``[envs, A]`` expected Q -> ``[envs]`` actions: argmax, or a uniform action with probability ``epsilon``."""
    actions = q.shape[-1]
    explore = counter_uniform(key, counter, 2 * lanes) < epsilon
    random_action = (counter_uniform(key, counter, 2 * lanes + 1) * actions).long().clamp_(max=actions - 1)
    return torch.where(explore, random_action, q.argmax(dim=-1))


def boltzmann(
    q: torch.Tensor, temperature: float | torch.Tensor, key: int, counter: torch.Tensor, lanes: torch.Tensor
) -> torch.Tensor:
    """``[envs, A]`` expected Q -> ``[envs]`` actions drawn from softmax(Q / temperature) by inverse CDF."""
    cdf = torch.softmax(q / temperature, dim=-1).cumsum(dim=-1)
    draw = counter_uniform(key, counter, lanes).unsqueeze(-1)
    return (cdf <= draw).sum(dim=-1).clamp_(max=q.shape[-1] - 1)


class BranchExplorer:
    """Per-branch exploration for ``n_envs`` environments with its own device counter.

    Each method draws with the current counter and then advances it by one, on
    the device. The branch keys derive from ``seed``, so the same seed and the
    same call sequence give the same actions.
    """

    def __init__(self, n_envs: int, seed: int, device: torch.device | str = "cpu") -> None:
        self.n_envs = n_envs
        self.device = torch.device(device)
        self.counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.n_branches = Branch.size()  # a plain int: torch.compile traces the methods below (learner.compile)
        self.reseed(seed)
        self._env_lanes = torch.arange(n_envs, dtype=torch.int64, device=self.device)

    def reseed(self, seed: int) -> None:
        """Derive the branch keys from ``seed`` (the draw counter is kept): a multi-device rank's own streams."""
        base = mix32(mix32(seed & MASK32) ^ ((seed >> 32) & MASK32))
        # One independent key per (branch, purpose).
        # keyed by plain ints: torch.compile traces the lookups (an enum-keyed dict recursed in dynamo's guards)
        self._keys = {
            (int(b), purpose): mix32(base ^ mix32(b * _KEY_STRIDE + purpose + 1))
            for b in Branch
            for purpose in _PURPOSES
        }

    def _check(self, values: Sequence[torch.Tensor]) -> None:
        if len(values) != self.n_branches:
            raise ValueError(f"expected one [envs, A] tensor per branch ({self.n_branches}), got {len(values)}")

    def epsilon_greedy(self, q: Sequence[torch.Tensor], epsilon: float | torch.Tensor) -> torch.Tensor:
        """One ``[envs, A_b]`` expected-Q tensor per branch -> actions ``[envs, Branch]``."""
        self._check(q)
        actions = torch.stack(
            [
                epsilon_greedy(q[b], _branch_value(epsilon, b), self._keys[(b, _EPSILON_GREEDY)], self.counter, self._env_lanes)
                for b in range(self.n_branches)  # plain ints: torch.compile traces enum indices badly
            ],
            dim=-1,
        )
        self.counter.add_(1)
        return actions

    def boltzmann(self, q: Sequence[torch.Tensor], temperature: float | torch.Tensor) -> torch.Tensor:
        """One ``[envs, A_b]`` expected-Q tensor per branch -> Boltzmann actions ``[envs, Branch]``."""
        self._check(q)
        actions = torch.stack(
            [
                boltzmann(q[b], _branch_value(temperature, b), self._keys[(b, _BOLTZMANN)], self.counter, self._env_lanes)
                for b in range(self.n_branches)  # plain ints: torch.compile traces enum indices badly
            ],
            dim=-1,
        )
        self.counter.add_(1)
        return actions

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The draw counter (live): all the state there is, since the keys derive from the seed."""
        return {"counter": self.counter}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Set the draw counter in place (a captured graph keeps its address), after checking shape and dtype."""
        load_in_place(self.state_dict(), state, "explorer state", "it was saved by another version of foxhunt")
