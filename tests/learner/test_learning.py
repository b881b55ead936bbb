"""The learner learns: a one-step bandit where LONG pays the first feature and SHORT pays its negative."""

from __future__ import annotations

import pytest
import torch

from foxhunt.actions import Branch, Direction, branch_sizes
from foxhunt_plugins.losses import iql


@pytest.mark.parametrize("variant", ["default", "iql"])
def test_learns_the_planted_direction(make_learner, kit, variant: str) -> None:
    """Also with the IQL value head on: C51 on atoms centred per sample on V(s) learns the same bandit."""
    changes = {}
    if variant == "iql":
        changes = {"extra": [(iql, "iql")], "settings": {"iql": {"enabled": True}}, "budgets": {"c51": 0.3, "iql": 0.1}}
    learner = make_learner(fill=0, hidden=(32, 32), head_hidden=16, lr=3e-3, n_step=1, v_min=-3.0, v_max=3.0, **changes)
    g = torch.Generator().manual_seed(0)
    sizes = torch.tensor(branch_sizes())
    sign = torch.zeros(len(Direction))
    sign[Direction.LONG], sign[Direction.SHORT] = 1.0, -1.0
    for _ in range(120):
        obs = torch.randn(kit.n_envs, kit.obs_dim, generator=g)
        actions = (torch.rand(kit.n_envs, len(Branch), generator=g) * sizes).long()
        reward = obs[:, 0] * sign[actions[:, Branch.DIRECTION]]
        learner.replay.add(obs, actions, reward, obs, torch.ones(kit.n_envs))  # every step ends its episode
    for _ in range(120):
        learner.step(64)
    test = torch.randn(400, kit.obs_dim, generator=g)
    choice = learner.act_values(test)[:, Branch.DIRECTION].argmax(-1)
    best = torch.where(test[:, 0] > 0, int(Direction.LONG), int(Direction.SHORT))
    clear = test[:, 0].abs() > 0.3
    accuracy = (choice[clear] == best[clear]).float().mean()
    assert float(accuracy) > 0.9
    assert int(learner.metrics()["grad.safety_clips"]) == 0
    if variant == "iql":  # the head learnt something: its expectiles are ordered on most states
        values = learner.network.state_value_heads(learner.network.features(test)).detach()
        ordered = (values[..., iql.Expectile.HIGH] >= values[..., iql.Expectile.LOW]).float().mean()
        assert float(ordered) > 0.9
