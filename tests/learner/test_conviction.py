"""The conviction margins (``[learner] conviction_floor``, ``conviction_spread``): the acting values against float64
references, the same margins on every acting path (learner, policy, exported module in TorchScript and ONNX), and
nothing added when they are off."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.actions import Branch, Direction
from foxhunt.features import Normalizer
from foxhunt.learner import LearnerConfig
from foxhunt.learner.conviction import with_conviction_floor, with_conviction_spread
from foxhunt.policy import Policy
from foxhunt.policy_export import GreedyPolicy

N_DIRECTIONS = Direction.size()


def reference_direction(q: np.ndarray, mu: float, sigma: float, floor: float) -> int:
    """HOLD unless another direction's unnormalised Q beats HOLD's by more than floor·σ; then the best of them."""
    values = q * sigma + mu
    best = int(np.argmax(values))
    if best == Direction.HOLD or values[best] <= values[Direction.HOLD] + floor * sigma:
        return int(Direction.HOLD)
    return best


@settings(deadline=None)
@given(floor=st.floats(0.0, 3.0), seed=st.integers(0, 2**31 - 1))
def test_the_greedy_direction_matches_a_float64_reference(floor: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, width = 32, 5
    q = rng.normal(size=(n, len(Branch), width))
    q[:, :, N_DIRECTIONS:] = -np.inf  # the direction branch has 4 real actions of 5 slots
    mu, sigma = rng.normal(size=len(Branch)), rng.uniform(0.1, 3.0, size=len(Branch))
    shaped = with_conviction_floor(torch.from_numpy(q), floor) * torch.from_numpy(sigma)[:, None] + torch.from_numpy(mu)[:, None]
    actions = shaped.argmax(-1).numpy()
    for i in range(n):
        want = reference_direction(q[i, Branch.DIRECTION, :N_DIRECTIONS], mu[Branch.DIRECTION], sigma[Branch.DIRECTION], floor)
        assert actions[i, Branch.DIRECTION] == want
        for branch in Branch:  # the other branches are untouched
            if branch != Branch.DIRECTION:
                assert actions[i, branch] == int(np.argmax(q[i, branch]))


def test_the_learner_and_its_policy_act_with_the_floor(make_learner, kit) -> None:
    plain = make_learner(seed=2, dtype=torch.float64)
    floored = make_learner(seed=2, dtype=torch.float64, conviction_floor=0.7)
    for _ in range(3):
        plain.step(32)
        floored.step(32)  # the floor shapes acting only: both learners train identically
    for a, b in zip(plain.params, floored.params, strict=True):
        assert torch.equal(a, b)
    obs = torch.randn(50, kit.obs_dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    base, shaped = plain.act_values(obs), floored.act_values(obs)
    expected = base.clone()
    expected[:, Branch.DIRECTION, Direction.HOLD] += 0.7 * floored.popart.sigma[Branch.DIRECTION]
    torch.testing.assert_close(shaped, expected, rtol=1e-12, atol=1e-12)
    policy = Policy.of_learner(floored, Normalizer(np.zeros(1), np.ones(1)), {})
    assert torch.equal(policy.act_values(obs), shaped)
    exported = GreedyPolicy(policy.network, policy.support(), policy.popart.mu, policy.popart.sigma,
                            policy.config.conviction_floor)
    actions, values = exported(obs)
    assert torch.equal(actions, shaped.argmax(-1))
    torch.testing.assert_close(values, shaped, rtol=1e-12, atol=1e-12)


def test_off_adds_nothing_and_bad_floors_are_refused(make_learner, kit) -> None:
    assert LearnerConfig().conviction_floor == 0.0
    learner = make_learner(seed=1)
    obs = torch.randn(20, kit.obs_dim, generator=torch.Generator().manual_seed(3))
    raw = learner.popart.unnormalize_q(learner.network.expected_q(obs, learner.support()))
    assert torch.equal(learner.act_values(obs), raw)
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="conviction_floor"):
            LearnerConfig(conviction_floor=bad)


def reference_spread_values(q: np.ndarray, ensemble: np.ndarray, spread: float) -> np.ndarray:
    """Loops in float64: each direction but HOLD loses ``spread`` times the sample standard deviation over the
    heads of ``ensemble[k, a] - ensemble[k, HOLD]``; the other branches keep their values."""
    out = q.copy()
    heads = ensemble.shape[0]
    for a in range(N_DIRECTIONS):
        advantages = [ensemble[k, Branch.DIRECTION, a] - ensemble[k, Branch.DIRECTION, Direction.HOLD]
                      for k in range(heads)]
        mean = sum(advantages) / heads
        deviation = (sum((x - mean) ** 2 for x in advantages) / (heads - 1)) ** 0.5
        out[Branch.DIRECTION, a] -= spread * deviation
    return out


@settings(deadline=None)
@given(spread=st.floats(0.0, 3.0), heads=st.integers(2, 7), seed=st.integers(0, 2**31 - 1))
def test_the_spread_margin_matches_a_float64_reference(spread: float, heads: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, width = 16, 5
    q = rng.normal(size=(n, len(Branch), width))
    q[:, :, N_DIRECTIONS:] = -np.inf
    ensemble = rng.normal(size=(heads, n, len(Branch), width)) * rng.uniform(0.0, 2.0, size=(1, n, 1, 1))
    shaped = with_conviction_spread(torch.from_numpy(q), torch.from_numpy(ensemble), spread).numpy()
    for i in range(n):
        want = reference_spread_values(q[i], ensemble[:, i], spread)
        np.testing.assert_allclose(shaped[i], want, rtol=1e-12, atol=1e-12)
        # a trade is taken only when it beats holding by more than the margin
        best = int(np.argmax(shaped[i, Branch.DIRECTION]))
        assert shaped[i, Branch.DIRECTION, best] >= q[i, Branch.DIRECTION, Direction.HOLD]


def test_heads_that_agree_cost_a_trade_nothing() -> None:
    q = torch.zeros(1, len(Branch), 4, dtype=torch.float64)
    q[0, Branch.DIRECTION] = -1.0
    q[0, Branch.DIRECTION, Direction.HOLD] = 0.0
    q[0, Branch.DIRECTION, Direction.LONG] = 0.3
    agreeing = torch.zeros(5, 1, len(Branch), 4, dtype=torch.float64) + torch.randn(5, 1, 1, 1, dtype=torch.float64)
    assert torch.equal(with_conviction_spread(q, agreeing, 10.0), q)  # every head: the same advantages
    assert q[0, Branch.DIRECTION].argmax() == Direction.LONG
    split = agreeing.clone()
    split[:, 0, Branch.DIRECTION, Direction.LONG] += torch.tensor([1.0, -1.0, 1.0, -1.0, 0.0], dtype=torch.float64)
    shaped = with_conviction_spread(q, split, 1.0)
    assert shaped[0, Branch.DIRECTION].argmax() == Direction.HOLD  # 0.3 against a spread of about 0.89
    assert shaped[0, Branch.DIRECTION, Direction.HOLD] == 0.0
    assert shaped[0, Branch.DIRECTION, Direction.SHORT] == -1.0  # the heads agree on SHORT's advantage


def test_every_acting_path_takes_the_spread(make_learner, kit) -> None:
    plain = make_learner(seed=4, dtype=torch.float64)
    spread = make_learner(seed=4, dtype=torch.float64, conviction_spread=0.8, conviction_floor=0.1)
    for _ in range(3):
        plain.step(32)
        spread.step(32)  # the margins shape acting only: both learners train identically
    for a, b in zip(plain.params, spread.params, strict=True):
        assert torch.equal(a, b)
    obs = torch.randn(40, kit.obs_dim, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    network = spread.network
    with torch.no_grad():
        h = network.features(obs)
        raw_q = network.expected_q(obs, spread.support())
        ensemble = network.ensemble_values(h)
    expected = np.stack([reference_spread_values(raw_q[i].numpy(), ensemble[:, i].numpy(), 0.8)
                         for i in range(obs.shape[0])])
    expected[:, Branch.DIRECTION, Direction.HOLD] += 0.1
    sigma, mu = spread.popart.sigma.detach().numpy(), spread.popart.mu.detach().numpy()
    expected = expected * sigma[None, :, None] + mu[None, :, None]
    values = spread.act_values(obs)
    np.testing.assert_allclose(values.detach().numpy(), expected, rtol=1e-10, atol=1e-10)
    assert not torch.equal(values, plain.act_values(obs))
    policy = Policy.of_learner(spread, Normalizer(np.zeros(1), np.ones(1)), {})
    assert torch.equal(policy.act_values(obs), values)
    exported = GreedyPolicy(policy.network, policy.support(), policy.popart.mu, policy.popart.sigma,
                            policy.config.conviction_floor, policy.config.conviction_spread)
    actions, exported_values = exported(obs)
    assert torch.equal(actions, values.argmax(-1))
    torch.testing.assert_close(exported_values, values, rtol=1e-12, atol=1e-12)



@pytest.mark.filterwarnings("ignore::FutureWarning")  # notices about torch's exporter itself
def test_the_onnx_export_carries_the_spread(make_learner, kit, tmp_path) -> None:
    learner = make_learner(seed=4, conviction_spread=0.8)
    for _ in range(3):
        learner.step(32)
    module = GreedyPolicy(learner.network, learner.support(), learner.popart.mu, learner.popart.sigma,
                          0.0, learner.config.conviction_spread).eval()
    obs = torch.randn(40, kit.obs_dim, generator=torch.Generator().manual_seed(6)) * 3.0
    example = obs[:3]
    with torch.no_grad():
        program = torch.onnx.export(module, (example,), dynamo=True, input_names=["observation"],
                                    output_names=["actions", "q_values"],
                                    dynamic_shapes=({0: torch.export.Dim("batch", min=1)},), verbose=False)
    path = tmp_path / "spread.onnx"
    path.write_bytes(program.model_proto.SerializeToString())
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    onnx_actions, onnx_values = session.run(None, {"observation": obs.numpy()})
    with torch.no_grad():
        torch_actions, torch_values = module(obs)
    torch.testing.assert_close(torch_values, learner.act_values(obs), rtol=0.0, atol=0.0)
    assert np.array_equal(onnx_actions, torch_actions.numpy())
    np.testing.assert_allclose(onnx_values, torch_values.numpy(), rtol=0.0, atol=1e-5)


def test_the_spread_is_off_by_default_and_bad_values_are_refused() -> None:
    assert LearnerConfig().conviction_spread == 0.0
    for bad in (-0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="conviction_spread"):
            LearnerConfig(conviction_spread=bad)
