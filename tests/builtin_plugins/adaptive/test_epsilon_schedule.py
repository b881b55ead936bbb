"""ε is scheduled over the fold's environment transitions: the same at the same data whatever ``env.n_envs``."""

from __future__ import annotations

import numpy as np
import pytest
from adaptive_harness import BACKENDS, build_run

from foxhunt.config import load_config
from foxhunt.fold_length import fold_length_of
from foxhunt.plugin.records import KernelPoint

STEPS_PER_EPOCH = 8192
EPOCHS = 4


def _config(n_envs: int, epochs: int = EPOCHS):
    return load_config(None, [
        f"env.n_envs={n_envs}", f"train.epochs={epochs}", f"train.env_steps_per_epoch={STEPS_PER_EPOCH}",
        "plugins.epsilon.health_boost=0.0", "plugins.epsilon.decay_fraction=0.5",
    ])


def _trajectory(n_envs: int, backend, device, *, epochs: int = EPOCHS, fold_start: int = 0) -> dict[int, float]:
    """ε of the direction branch after every vector step of one fold, keyed by the fold's transitions so far."""
    config = _config(n_envs, epochs)
    run = build_run(["epsilon"], config=config, device=device, diagnostics=False)
    context = run.context(backend, device, {})
    run.step.fill_(fold_start)  # an earlier fold's steps: the fold kernel takes the counter as its zero
    for kernel in run.points(KernelPoint.FOLD):
        kernel.run(context)
    update = run.kernels["epsilon.update"]
    vector_steps = fold_length_of(config).env_steps // n_envs
    trajectory = {}
    for step in range(1, vector_steps + 1):
        run.step.add_(1)  # the trainer advances it after every vector step
        update.run(context)
        trajectory[step * n_envs] = float(run.isv.view("epsilon.branch")[0])
    return trajectory


@pytest.mark.parametrize(("backend", "device"), BACKENDS[:1], ids=[b.value for b, _ in BACKENDS[:1]])
def test_epsilon_at_the_same_transitions_does_not_depend_on_n_envs(backend, device):
    few = _trajectory(64, backend, device)
    many = _trajectory(1024, backend, device, fold_start=37)
    shared = sorted(set(few) & set(many))
    assert len(shared) == EPOCHS * STEPS_PER_EPOCH // 1024
    np.testing.assert_allclose([few[t] for t in shared], [many[t] for t in shared], rtol=1e-6)
    # linear from start to end over the first half of the fold's 32768 transitions, then flat at the end value
    start, end = 1.0, 0.02
    half = EPOCHS * STEPS_PER_EPOCH / 2
    for t in shared:
        expected = end + (start - end) * max(0.0, 1.0 - t / half)
        assert many[t] == pytest.approx(expected, abs=1e-5), t


@pytest.mark.parametrize(("backend", "device"), BACKENDS[:1], ids=[b.value for b, _ in BACKENDS[:1]])
def test_epsilon_decays_inside_the_first_epoch(backend, device):
    # the epoch index no longer holds ε at its start value for a whole epoch: one long epoch or four short ones
    one = _trajectory(256, backend, device, epochs=1)
    quarter = STEPS_PER_EPOCH // 4
    assert one[quarter] < 0.6 < one[256]
    assert one[STEPS_PER_EPOCH] == pytest.approx(0.02, abs=1e-6)
