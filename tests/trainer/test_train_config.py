"""``[train]``: training length in env steps and updates, laid out over vector steps of any width."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from foxhunt.trainer.config import TrainConfig


@given(
    env_steps=st.integers(1, 200_000),
    updates=st.integers(0, 5_000),
    n_envs=st.integers(1, 70_000),
)
def test_an_epoch_makes_exactly_its_updates_whatever_the_width(env_steps: int, updates: int, n_envs: int) -> None:
    plan = TrainConfig(env_steps_per_epoch=env_steps, updates_per_epoch=updates, warmup_env_steps=0).plan(n_envs)
    per_step = [plan.updates_after(1, step) for step in range(plan.vector_steps)]
    assert sum(per_step) == updates
    assert max(per_step) - min(per_step) <= 1  # spread evenly, never bunched
    assert env_steps <= plan.env_steps < env_steps + n_envs  # at least the asked-for transitions, one vector step more at most


def test_changing_n_envs_keeps_the_work_of_an_epoch() -> None:
    config = TrainConfig(env_steps_per_epoch=65_536, updates_per_epoch=800, warmup_env_steps=0)
    narrow, wide = config.plan(64), config.plan(4096)
    assert (narrow.vector_steps, wide.vector_steps) == (1024, 16)
    assert narrow.env_steps == wide.env_steps == 65_536
    assert sum(narrow.updates_after(0, s) for s in range(1024)) == sum(wide.updates_after(0, s) for s in range(16)) == 800
    assert {wide.updates_after(0, s) for s in range(16)} == {50}


def test_the_warm_up_only_collects() -> None:
    plan = TrainConfig(env_steps_per_epoch=800, updates_per_epoch=100, warmup_env_steps=250).plan(100)
    assert plan.warmup_vector_steps == 3
    assert [plan.updates_after(0, s) for s in range(8)] == [0, 0, 0, 13, 12, 13, 12, 13]
    assert plan.updates_after(1, 0) == 12  # later epochs are past the warm-up


def test_the_cpu_default_keeps_one_update_per_vector_step() -> None:
    plan = TrainConfig().plan(64)
    assert (plan.vector_steps, plan.warmup_vector_steps) == (200, 32)
    assert {plan.updates_after(1, s) for s in range(200)} == {1}
