"""Gymnasium spaces of the futures env, and the check every action batch passes before it reaches the kernel.

An action is one choice per branch of :class:`foxhunt.actions.Branch`
(direction, magnitude, order type, urgency): a ``MultiDiscrete`` of the
branches' sizes. An observation is the market features of the current bar
followed by the portfolio features (:class:`foxhunt.env.PortfolioObs`), float32.
The physics reads unknown action codes as HOLD or FULL, so a code out of range
would trade silently; :func:`checked_actions` refuses it instead.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from foxhunt.actions import BRANCH_TABLES, Branch, branch_sizes

__all__ = ["action_space", "observation_space", "checked_actions"]


def action_space(seed: int | None = None) -> spaces.MultiDiscrete:
    """One environment's action: ``MultiDiscrete`` of the branch sizes, in ``Branch`` order (int64)."""
    return spaces.MultiDiscrete(np.array(branch_sizes(), dtype=np.int64), dtype=np.int64, seed=seed)


def observation_space(width: int) -> spaces.Box:
    """One environment's observation: ``width`` float32 values (the portfolio part is not bounded)."""
    return spaces.Box(low=-np.inf, high=np.inf, shape=(width,), dtype=np.float32)


def _branch_help(branch: Branch) -> str:
    names = BRANCH_TABLES[branch].names()
    return f"0..{len(names) - 1} ({', '.join(f'{i} {name}' for i, name in enumerate(names))})"


def checked_actions(actions: object, n_envs: int, device: torch.device) -> torch.Tensor:
    """``actions`` (``[n_envs, Branch]`` integers, a NumPy array, a list or a torch tensor) as an int64 tensor on
    ``device``; a wrong shape, a non-integer type or a code outside its branch raises ``ValueError`` naming it."""
    if isinstance(actions, torch.Tensor):
        tensor = actions
    else:
        try:
            array = np.asarray(actions)
        except ValueError:  # a ragged nesting of lists
            array = np.empty(0, dtype=object)
        if array.dtype == object:
            raise ValueError(f"actions must be integers of shape ({n_envs}, {Branch.size()}), got {actions!r}")
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    expected = (n_envs, Branch.size())
    if tuple(tensor.shape) != expected:
        raise ValueError(
            f"actions must have shape {expected} (environments, branches {', '.join(Branch.names())}), "
            f"got {tuple(tensor.shape)}"
        )
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise ValueError(f"actions must be integers (one sub-action index per branch), got dtype {tensor.dtype}")
    tensor = tensor.to(device=device, dtype=torch.int64)
    sizes = torch.tensor(branch_sizes(), dtype=torch.int64, device=device)
    bad = (tensor < 0) | (tensor >= sizes)
    if bool(bad.any()):
        env, column = (int(v) for v in torch.nonzero(bad)[0])
        branch = Branch(column)
        raise ValueError(
            f"action of environment {env}, branch {branch.name}, is {int(tensor[env, column])}; it must be in "
            f"{_branch_help(branch)}"
        )
    return tensor
