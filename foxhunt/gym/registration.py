"""Registration of the foxhunt envs with Gymnasium, done when ``foxhunt.gym`` is imported.

``gymnasium.make(ENV_ID)`` builds a :class:`~foxhunt.gym.env.FoxhuntEnv` and
``gymnasium.make_vec(ENV_ID, num_envs=N)`` a
:class:`~foxhunt.gym.vector.FoxhuntVectorEnv` through the spec's
``vector_entry_point`` (one batched kernel, not N copies). Keyword arguments
of ``make``/``make_vec`` go to the constructors (``data``, ``config``,
``overrides``, ``fold``, ``window``, ``seed``, ``device``, and ``tensors``
for the vector env). Without ``import foxhunt.gym`` first, the id can be
given as ``"foxhunt.gym:foxhunt/Futures-v0"``: Gymnasium imports the module
before it looks the id up.
"""

from __future__ import annotations

import gymnasium

__all__ = ["ENV_ID", "register_envs"]

ENV_ID = "foxhunt/Futures-v0"


def register_envs() -> None:
    """Register :data:`ENV_ID` once (a second call, or a second import, leaves the first registration)."""
    if ENV_ID in gymnasium.registry:
        return
    gymnasium.register(
        id=ENV_ID,
        entry_point="foxhunt.gym.env:FoxhuntEnv",
        vector_entry_point="foxhunt.gym.vector:FoxhuntVectorEnv",
        # Episodes end by the physics (env.episode_bars, the window's end, bankruptcy): no TimeLimit wrapper.
        max_episode_steps=None,
        # A seeded reset gives the same episode; different seeds, different start bars.
        nondeterministic=False,
    )
