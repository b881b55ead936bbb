"""foxhunt's futures environment for Gymnasium-based trainers (the ``gym`` extra: ``pip install 'foxhunt[gym]'``).

Importing this package registers ``foxhunt/Futures-v0`` (``foxhunt.gym.registration``)::

    import gymnasium
    import foxhunt.gym

    env = gymnasium.make("foxhunt/Futures-v0", data="eurusd-1h-2017")           # FoxhuntEnv
    envs = gymnasium.make_vec("foxhunt/Futures-v0", num_envs=8)                  # FoxhuntVectorEnv

See ``docs/gym.md``.
"""

from __future__ import annotations

try:
    import gymnasium  # noqa: F401 - only to say what is missing
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError("foxhunt.gym needs Gymnasium 1.x: pip install 'foxhunt[gym]'") from error

from foxhunt.gym.env import FoxhuntEnv
from foxhunt.gym.market import WINDOWS, GymMarket, prepare_market, resolve_config
from foxhunt.gym.registration import ENV_ID, register_envs
from foxhunt.gym.spaces import action_space, checked_actions, observation_space
from foxhunt.gym.vector import AUTORESET_MODES, FoxhuntVectorEnv

__all__ = [
    "AUTORESET_MODES",
    "ENV_ID",
    "FoxhuntEnv",
    "FoxhuntVectorEnv",
    "GymMarket",
    "WINDOWS",
    "action_space",
    "checked_actions",
    "observation_space",
    "prepare_market",
    "register_envs",
    "resolve_config",
]

register_envs()
