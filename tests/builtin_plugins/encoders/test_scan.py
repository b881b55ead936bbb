"""The selective scan encoder: its all-bars-at-once state against the recurrence stepped bar by bar in float64,
gradients included, and its settings and record."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.learner import BranchingNetwork, LearnerConfig
from foxhunt_plugins.encoders import scan


def stepped_state(x: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``h_t = exp(dt_t a) h_{t-1} + dt_t x_t b_tᵀ`` from ``h = 0``, one bar at a time."""
    batch, window, heads, size = x.shape
    h = torch.zeros(batch, heads, size, b.shape[-1], dtype=x.dtype)
    for t in range(window):
        decay = torch.exp(dt[:, t] * a)[:, :, None, None]
        h = decay * h + dt[:, t, :, None, None] * x[:, t, :, :, None] * b[:, t, None, None, :]
    return h


def random_inputs(seed: int, window: int, heads: int, requires_grad: bool = False) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, window, heads, 2, generator=g, dtype=torch.float64)
    dt = torch.nn.functional.softplus(torch.randn(3, window, heads, generator=g, dtype=torch.float64))
    a = -torch.exp(torch.randn(heads, generator=g, dtype=torch.float64))
    b = torch.randn(3, window, 4, generator=g, dtype=torch.float64)
    return tuple(t.requires_grad_(requires_grad) for t in (x, dt, a, b))


@settings(deadline=None, max_examples=20)
@given(seed=st.integers(0, 10_000), window=st.integers(1, 12), heads=st.integers(1, 3))
def test_the_parallel_state_is_the_recurrence_and_so_is_its_gradient(seed: int, window: int, heads: int) -> None:
    inputs = random_inputs(seed, window, heads, requires_grad=True)
    parallel, stepped = scan.last_state(*inputs), stepped_state(*inputs)
    torch.testing.assert_close(parallel, stepped, rtol=1e-10, atol=1e-12)
    weights = torch.randn(parallel.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    grads = torch.autograd.grad((parallel * weights).sum(), inputs)
    expected = torch.autograd.grad((stepped * weights).sum(), inputs)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)


def test_the_parallel_state_passes_gradcheck_in_float64() -> None:
    assert torch.autograd.gradcheck(scan.last_state, random_inputs(1, 5, 2, requires_grad=True))


def test_the_encoder_reads_the_stepped_scan_at_the_last_bar() -> None:
    torch.manual_seed(0)
    encoder = scan.build(3, 2, scan.ScanSettings(window=5, width=4, state=3, heads=2)).double()
    x = torch.randn(4, 5 * 3 + 2, dtype=torch.float64)
    u, z, b, c, dt = encoder.project(x)
    h = stepped_state(u, dt, -torch.exp(encoder.a_log), b)
    y = (h * c[:, -1, None, None, :]).sum(-1) + encoder.skip[:, None] * u[:, -1]
    y = y.reshape(4, 4) * torch.nn.functional.silu(z[:, -1])
    mean, var = y.mean(-1, keepdim=True), y.var(-1, unbiased=False, keepdim=True)
    expected = torch.cat([encoder.out((y - mean) / torch.sqrt(var + 1e-5)), x[:, 15:]], dim=1)
    torch.testing.assert_close(encoder(x), expected)
    assert encoder.out_features == 4 + 2


def test_the_first_step_sizes_are_spread_between_their_bounds() -> None:
    encoder = scan.build(2, 1, scan.ScanSettings(heads=4))
    dt = torch.nn.functional.softplus(encoder.dt_bias)
    torch.testing.assert_close(dt[[0, -1]], torch.tensor([scan.DT_MIN, scan.DT_MAX]))


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="divide"):
        scan.ScanSettings(width=6, heads=4)
    with pytest.raises(ValueError, match="window"):
        scan.ScanSettings(window=1)


def test_the_record_carries_the_window_and_builds_a_network_spectral_norm_can_bound() -> None:
    chosen = scan.ScanSettings(window=6, width=8, state=4, heads=2)
    (record,) = scan.foxhunt_encoders(chosen)
    assert (record.name, record.window, record.settings) == ("scan", 6, chosen)
    network = BranchingNetwork(6 * 3 + 2, LearnerConfig(hidden=(16,), head_hidden=8, n_atoms=5),
                               encoder=record.build(3, 2, record.settings))
    assert network.trunk[0].in_features == 8 + 2
    assert all(w.ndim in (2, 3) for w in network.weight_matrices())
