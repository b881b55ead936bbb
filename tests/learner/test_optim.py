"""make_optimizer's weight decay: all parameters, or only the ones asked for (the learner's trunk scope)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.learner.optim import make_optimizer
from tests.learner_builders import assert_resumes_identically, small_config


def zero_gradient_step(params: list[torch.nn.Parameter], decayed: list[torch.nn.Parameter] | None,
                       lr: float, weight_decay: float) -> None:
    """One AdamW step where every gradient is zero: what moves a weight is the decay alone."""
    optimizer = make_optimizer(params, small_config(weight_decay=weight_decay), torch.tensor(lr), decayed)
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(1e-4, 1e-1), st.floats(0.0, 5.0), st.sets(st.integers(0, 3)))
def test_decay_shrinks_exactly_the_chosen_parameters(seed: int, lr: float, weight_decay: float,
                                                     chosen: set[int]) -> None:
    generator = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(3, 2, generator=generator)) for _ in range(4)]
    before = [p.detach().to(torch.float64).clone() for p in params]
    zero_gradient_step(params, [params[i] for i in sorted(chosen)], lr, weight_decay)
    for i, (p, start) in enumerate(zip(params, before, strict=True)):
        # decoupled decay: w <- w (1 - lr wd), in float64; an undecayed weight does not move at all
        expected = start * (1.0 - lr * weight_decay) if i in chosen else start
        torch.testing.assert_close(p.detach().to(torch.float64), expected, rtol=1e-6, atol=1e-7)


def test_without_a_choice_every_parameter_decays_in_one_group() -> None:
    params = [torch.nn.Parameter(torch.ones(2)) for _ in range(2)]
    optimizer = make_optimizer(params, small_config(weight_decay=2.0), torch.tensor(0.1))
    assert len(optimizer.param_groups) == 1
    zero_gradient_step(params, None, 0.1, 2.0)
    for p in params:
        torch.testing.assert_close(p.detach(), torch.full((2,), 0.8))


def test_a_decayed_parameter_must_be_optimised() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    with pytest.raises(ValueError, match="not among the optimised parameters"):
        make_optimizer(params, small_config(), torch.tensor(0.1), [torch.nn.Parameter(torch.ones(2))])


def test_the_trunk_scope_decays_the_encoder_and_trunk_only(make_learner) -> None:
    learner = make_learner(weight_decay_scope="trunk", weight_decay=3.0, fill=0)
    decayed, kept = learner.optimizer.param_groups
    trunk = {id(p) for p in learner.network.trunk.parameters()} | {id(p) for p in learner.network.encoder.parameters()}
    assert {id(p) for p in decayed["params"]} == trunk and decayed["weight_decay"] == 3.0
    assert trunk.isdisjoint(id(p) for p in kept["params"]) and kept["weight_decay"] == 0.0
    assert len(decayed["params"]) + len(kept["params"]) == len(learner.optimized)
    assert len(make_learner(weight_decay=3.0, fill=0).optimizer.param_groups) == 1  # "all", the default


def test_the_trunk_scope_round_trips_through_a_checkpoint(make_learner) -> None:
    a = make_learner(seed=1, weight_decay_scope="trunk", weight_decay=3.0)
    for _ in range(3):
        a.step(32)
    assert_resumes_identically(a, make_learner(seed=99, weight_decay_scope="trunk", weight_decay=3.0, fill=0))
    # and it is a different run from decaying everything: the heads kept their scale
    c = make_learner(seed=1, weight_decay=3.0)
    for _ in range(6):
        c.step(32)
    assert not torch.equal(c.state_dict()["network.value_out.weight"], a.state_dict()["network.value_out.weight"])
