"""Every loss component's gradient against float64 central finite differences on a tiny network."""

from __future__ import annotations

import pytest
import torch

from foxhunt.learner import Learner
from foxhunt_plugins.losses import c51, cql, ensemble, iqn, mse

COMPONENTS = [c51.NAME, mse.NAME, cql.NAME, iqn.NAME, ensemble.NAME]


def loss_fn(learner: Learner, name: str):
    component = next(c for c in learner.components if c.name == name)
    batch = learner.sample(12)
    rng_state = learner.generator.get_state()

    def evaluate() -> torch.Tensor:
        learner.generator.set_state(rng_state)  # the same τ draws at every evaluation
        return component.loss(learner.loss_inputs(batch))

    return evaluate


@pytest.mark.parametrize("name", COMPONENTS)
def test_gradient_matches_finite_differences(make_learner, name: str) -> None:
    learner = make_learner(hidden=(8,), head_hidden=6, n_atoms=7, ensemble_size=2,
                           settings={"c51": {"label_smoothing_max": 0.3}}, dtype=torch.float64)
    for _ in range(2):  # move off the initialisation (PopArt statistics, target != online)
        learner.step(16)
    evaluate = loss_fn(learner, name)
    params = learner.params
    grads = torch.autograd.grad(evaluate(), params, allow_unused=True, materialize_grads=True)
    candidates = [(p, g) for p, g in zip(params, grads, strict=True) if float(g.abs().max()) > 0]
    assert candidates, f"{name} has no gradient at all"
    g = torch.Generator().manual_seed(0)
    checked = 0
    h = 1e-6
    with torch.no_grad():
        for p, grad in candidates:
            flat, flat_grad = p.view(-1), grad.reshape(-1)
            nonzero = torch.nonzero(flat_grad.abs() > 1e-8).flatten()
            if len(nonzero) == 0:
                continue
            picks = nonzero[torch.randperm(len(nonzero), generator=g)[:3]]
            for i in picks.tolist():
                original = float(flat[i])
                flat[i] = original + h
                up = float(evaluate())
                flat[i] = original - h
                down = float(evaluate())
                flat[i] = original
                numeric = (up - down) / (2 * h)
                assert numeric == pytest.approx(float(flat_grad[i]), rel=1e-4, abs=1e-8), (name, p.shape, i)
                checked += 1
    assert checked >= 6
