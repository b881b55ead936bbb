"""The fused acting kernel (foxhunt.learner.fused_q) on a real GPU: the expected Q a float64 reference gives.

Run on an NVIDIA machine (not collected by the CPU suite, where acting never uses the kernel)::

    python3 -m pytest -q tests_gpu/test_fused_q.py
"""

from __future__ import annotations

import pytest
import torch

from foxhunt.learner import fused_q
from foxhunt.learner.network import BranchingNetwork
from tests.learner_builders import OBS_DIM, small_config

CUDA = torch.device("cuda")


@pytest.fixture(autouse=True)
def _a_gpu() -> None:
    if not torch.cuda.is_available():
        raise RuntimeError("tests_gpu needs an NVIDIA GPU; run it on the device machine")


def _inputs(seed: int, batch: int, branches: int, actions: int, atoms: int, hidden: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64) * scale

    support = torch.sort(draw(branches, atoms, scale=5.0), dim=-1).values
    return (draw(batch, branches, hidden).relu(), draw(branches, actions * atoms, hidden, scale=0.3),
            draw(branches, actions * atoms, scale=0.5), draw(batch, branches, 1, atoms, scale=2.0), support)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("batch", "branches", "actions", "atoms", "hidden"), [
    (1, 4, 4, 51, 64), (65, 4, 4, 51, 64), (1000, 4, 4, 51, 64), (333, 3, 2, 11, 8), (129, 4, 3, 101, 40),
])
def test_the_kernel_gives_the_float64_expected_q(seed: int, batch: int, branches: int, actions: int, atoms: int,
                                                 hidden: int) -> None:
    assert fused_q.load()
    inputs = _inputs(seed, batch, branches, actions, atoms, hidden)
    reference = fused_q.torch_expected_q(*inputs)  # float64, on the CPU
    previous = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        exact = fused_q.expected_q(*(t.float().to(CUDA) for t in inputs)).double().cpu()
        torch.backends.cuda.matmul.allow_tf32 = True
        tf32 = fused_q.expected_q(*(t.float().to(CUDA) for t in inputs)).double().cpu()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    assert exact.shape == (batch, branches, actions)
    torch.testing.assert_close(exact, reference, rtol=1e-5, atol=1e-5)
    # TF32 keeps 10 mantissa bits of each product's inputs: logits of a few units move by ~1e-3
    torch.testing.assert_close(tf32, reference, rtol=0.0, atol=5e-2)


def test_the_network_acts_with_the_kernel_on_cuda_and_agrees_with_its_torch_expression() -> None:
    torch.manual_seed(3)
    network = BranchingNetwork(OBS_DIM, small_config(n_atoms=51)).to(CUDA)
    with torch.no_grad():  # random padded rows: the centred weights must still ignore them
        network.advantage_out.weight.normal_()
        network.advantage_out.bias.normal_()
    obs = torch.randn(4096, OBS_DIM, device=CUDA) * 3.0
    support = torch.sort(torch.randn(network.n_branches, 51, device=CUDA) * 5.0, dim=-1).values
    h = network.features(obs)
    assert fused_q.applies(h, support)
    previous = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.no_grad():
            fused = network.expected_q(obs, support)
            value, adv_h = network._streams(h)
            weight, bias = network.centred_advantage_layer()
            plain = fused_q.torch_expected_q(adv_h, weight, bias, value, support)
            plain = plain.masked_fill(~network.action_mask, float("-inf"))
            compiled = torch.compile(network.expected_q, fullgraph=True, dynamic=False)(obs, support)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    padded = ~network.action_mask.expand_as(fused)
    assert torch.isneginf(fused[padded]).all()
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(compiled, plain, rtol=1e-5, atol=1e-5)


def test_the_kernel_replays_from_a_cuda_graph_on_new_inputs() -> None:
    assert fused_q.load()
    inputs = [t.float().to(CUDA) for t in _inputs(7, 2048, 4, 4, 51, 64)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fused_q.expected_q(*inputs)  # compiles the kernel outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fused_q.expected_q(*inputs)
    fresh = _inputs(8, 2048, 4, 4, 51, 64)
    for target, source in zip(inputs, fresh, strict=True):
        target.copy_(source)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double().cpu(), fused_q.torch_expected_q(*fresh), rtol=0.0, atol=5e-2)


def test_fused_acting_false_acts_with_the_torch_expression_on_cuda() -> None:
    torch.manual_seed(4)
    fused = BranchingNetwork(OBS_DIM, small_config(n_atoms=51)).to(CUDA)
    plain = BranchingNetwork(OBS_DIM, small_config(n_atoms=51, fused_acting=False)).to(CUDA)
    plain.load_state_dict(fused.state_dict())
    obs = torch.randn(512, OBS_DIM, device=CUDA)
    support = torch.sort(torch.randn(fused.n_branches, 51, device=CUDA) * 5.0, dim=-1).values
    with torch.no_grad():
        h = plain.features(obs)
        value, adv_h = plain._streams(h)
        weight, bias = plain.centred_advantage_layer()
        expected = fused_q.torch_expected_q(adv_h, weight, bias, value, support)
        expected = expected.masked_fill(~plain.action_mask, float("-inf"))
        assert torch.equal(plain.expected_q(obs, support), expected)
        torch.testing.assert_close(fused.expected_q(obs, support), expected, rtol=0.0, atol=5e-2)
