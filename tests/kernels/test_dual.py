"""The kernel framework: one row function, CPU and CUDA (or simulator) launchers, zero-copy tensors."""

from __future__ import annotations

import numba
import numpy as np
import pytest
import torch

from foxhunt.dims import DimTable, auto
from foxhunt.kernels import (
    Backend,
    DualKernel,
    KernelContext,
    device_constants,
    device_function,
    hash3,
    mix32,
    resolve_backend,
    uniform01,
)
from foxhunt.kernels.rng import MASK32


class Pair(DimTable):
    LEFT = auto()
    RIGHT = auto()


PAIR = device_constants(Pair)  # what kernels index with (numba.cuda rejects IntEnum indices)


@device_function
def weighted(row, pair, weight):
    return pair[row, PAIR.LEFT] * weight + pair[row, PAIR.RIGHT]


@device_function
def blend_row(i, args):
    pair, weights, out, counter = args
    out[i] = weighted(i, pair, weights[0])
    counter[i] = counter[i] + 1


BLEND = DualKernel(blend_row, "test.blend")


def cuda_backend() -> tuple[Backend, str]:
    # The real CUDA kernel where there is a GPU, the numba simulator (same kernel source) elsewhere.
    return (Backend.CUDA, "cuda") if torch.cuda.is_available() else (Backend.CUDASIM, "cpu")


def blend_inputs(n: int, device: str) -> tuple[torch.Tensor, ...]:
    pair = torch.arange(2 * n, dtype=torch.float64, device=device).reshape(n, Pair.size())
    return pair, torch.tensor([3.0], dtype=torch.float64, device=device), torch.zeros(n, dtype=torch.float64, device=device), torch.zeros(n, dtype=torch.int64, device=device)


def test_cpu_launch_writes_through_to_the_tensors() -> None:
    pair, weights, out, counter = tensors = blend_inputs(1000, "cpu")
    BLEND.launch(Backend.CPU, 1000, tensors)
    BLEND.launch(Backend.CPU, 1000, tensors)
    torch.testing.assert_close(out, pair[:, Pair.LEFT] * 3.0 + pair[:, Pair.RIGHT])
    assert bool((counter == 2).all())
    weights[0] = -1.0  # an in-place change is seen by the next launch: the arrays share memory
    BLEND.launch(Backend.CPU, 1000, tensors)
    torch.testing.assert_close(out, -pair[:, Pair.LEFT] + pair[:, Pair.RIGHT])


def test_cuda_launch_matches_cpu() -> None:
    backend, device = cuda_backend()
    cpu_tensors = blend_inputs(13, "cpu")
    gpu_tensors = blend_inputs(13, device)
    BLEND.launch(Backend.CPU, 13, cpu_tensors)
    BLEND.launch(backend, 13, gpu_tensors)
    if device == "cuda":
        torch.cuda.synchronize()
    for cpu_tensor, gpu_tensor in zip(cpu_tensors, gpu_tensors, strict=True):
        torch.testing.assert_close(gpu_tensor.cpu(), cpu_tensor)


def test_a_launch_shape_covers_every_row_and_bad_block_sizes_are_refused() -> None:
    # 128 threads per block and a register cap: 300 rows need 3 blocks, the last one partly idle.
    shaped = DualKernel(blend_row, "test.blend_shaped", threads_per_block=128, max_registers=32)
    backend, device = cuda_backend()
    pair, weights, out, counter = tensors = blend_inputs(300, device)
    shaped.launch(backend, 300, tensors)
    if device == "cuda":
        torch.cuda.synchronize()
    torch.testing.assert_close(out, pair[:, Pair.LEFT] * 3.0 + pair[:, Pair.RIGHT])
    assert bool((counter == 1).all())
    for threads in (0, 100, 2048):
        with pytest.raises(ValueError, match="threads_per_block"):
            DualKernel(blend_row, "test.bad", threads_per_block=threads)


def test_device_constants_mirror_the_table() -> None:
    assert PAIR == (0, 1) and PAIR.RIGHT == Pair.RIGHT and type(PAIR.RIGHT) is int


@device_function
def _enum_helper(pair, row):
    return pair[row, Pair.RIGHT]  # the IntEnum member itself: fine on the CPU, refused by numba.cuda


@device_function
def _enum_row(i, args):
    pair, out = args
    out[i] = _enum_helper(pair, i)


RIGHT = Pair.RIGHT


@device_function
def _member_row(i, args):
    pair, out = args
    out[i] = pair[i, RIGHT]


def test_a_kernel_reading_an_intenum_is_refused_when_it_is_made_naming_the_table_and_the_fix() -> None:
    # Reached through a helper: the refusal must not depend on where in the code the table is read.
    with pytest.raises(ValueError, match=r"kernel 'test.enum' reads .*test_dual\.Pair: .*device_constants\(Pair\)"):
        DualKernel(_enum_row, "test.enum")
    with pytest.raises(ValueError, match=r"kernel 'test.member' reads .*test_dual\.Pair\.RIGHT"):
        DualKernel(_member_row, "test.member")


def test_backend_resolution() -> None:
    assert resolve_backend("cpu") is Backend.CPU
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        resolve_backend("cpu", "cuda")
    if not torch.cuda.is_available():
        assert resolve_backend("cpu", "cudasim") is Backend.CUDASIM


def test_kernel_context_names_missing_signals_and_reads_isv_slots() -> None:
    class Layout:
        def offset(self, name: str) -> int:
            return {"a": 0, "b": 2}[name]

        def width(self, name: str) -> int:
            return {"a": 2, "b": 1}[name]

    isv = torch.arange(3.0)
    context = KernelContext(device="cpu", backend="cpu", isv=isv, layout=Layout(), signals={"x": isv})
    assert context.signal("x") is isv
    with pytest.raises(KeyError, match="signals: x"):
        context.signal("y")
    view = context.isv_slot("b")
    view.fill_(9.0)
    assert isv.tolist() == [0.0, 1.0, 9.0]  # slot "b" is a zero-copy view of the last element


def reference_mix32(x: int) -> int:
    x &= MASK32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK32
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


def test_mix32_is_lowbias32_on_python_numpy_torch_and_numba() -> None:
    words = np.random.default_rng(0).integers(0, 2**32, size=200, dtype=np.int64)
    expected = np.array([reference_mix32(int(w)) for w in words])
    assert np.array_equal(mix32(words), expected)
    assert np.array_equal(mix32(torch.from_numpy(words)).numpy(), expected)
    jitted = numba.njit(lambda w: mix32(w))
    assert [jitted(int(w)) for w in words[:20]] == list(expected[:20])


def test_counter_draws_differ_and_are_uniform() -> None:
    counters = np.arange(50_000, dtype=np.int64)
    words = hash3(12345, counters, 0)
    assert len(np.unique(words)) > 49_900
    u = uniform01(words)
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    assert not np.array_equal(hash3(12345, counters, 1), words)
    assert not np.array_equal(hash3(12346, counters, 0), words)
