"""Bad input reaches no kernel: each mistake is refused with a message that names it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.actions import Branch, Direction
from foxhunt.gym import FoxhuntVectorEnv, checked_actions

CPU = torch.device("cpu")


def test_good_actions_come_back_as_int64_tensors():
    actions = checked_actions([[Direction.LONG, 0, 1, 2], [Direction.FLAT, 2, 0, 0]], 2, CPU)
    assert actions.dtype == torch.int64 and actions.tolist() == [[2, 0, 1, 2], [3, 2, 0, 0]]


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (np.zeros((3, 4), dtype=np.int64), r"shape \(2, 4\) \(environments, branches DIRECTION, MAGNITUDE"),
        (np.zeros(4, dtype=np.int64), r"got \(4,\)"),
        (np.zeros((2, 4)), "must be integers .* got dtype torch.float64"),
        (np.array([[0, 0, 0, 0], [4, 0, 0, 0]]), r"environment 1, branch DIRECTION, is 4; it must be in 0\.\.3 \(0 SHORT"),
        (np.array([[0, -1, 0, 0], [0, 0, 0, 0]]), r"environment 0, branch MAGNITUDE, is -1"),
        (torch.tensor([[0, 0, 2, 0], [0, 0, 0, 0]]), r"branch ORDER_TYPE, is 2; it must be in 0\.\.1 \(0 MARKET, 1 LIMIT\)"),
        ([[0, 0, 0], [0, 0]], "must be integers of shape"),
    ],
    ids=["envs", "flat-vector", "floats", "direction-high", "magnitude-negative", "order-type-tensor", "ragged"],
)
def test_malformed_actions_are_refused_by_name(actions, message):
    with pytest.raises(ValueError, match=message):
        checked_actions(actions, 2, CPU)


def test_the_env_refuses_steps_before_reset_and_unknown_options(source, overrides):
    envs = FoxhuntVectorEnv(2, source, overrides=overrides)
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        envs.step(np.zeros((2, Branch.size()), dtype=np.int64))
    with pytest.raises(RuntimeError, match="first reset"):
        envs.reset(options={"reset_mask": np.array([True, False])})
    with pytest.raises(ValueError, match="unknown reset option"):
        envs.reset(options={"window": "test"})
    with pytest.raises(ValueError, match=r"reset_mask must be booleans of shape \(2,\)"):
        envs.reset(options={"reset_mask": np.array([1, 0])})
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"branch DIRECTION, is 9"):
        envs.step(np.full((2, Branch.size()), 9))


def test_bad_construction_arguments_are_named(source, overrides):
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        FoxhuntVectorEnv(0, source, overrides=overrides)
    with pytest.warns(UserWarning, match="render_mode='rgb_array' is ignored"):
        assert FoxhuntVectorEnv(1, source, overrides=overrides, render_mode="rgb_array").render_mode is None
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        FoxhuntVectorEnv(1, source, overrides=overrides, autoreset_mode="NextStep")
