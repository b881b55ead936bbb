"""Write a kernel once, run it on the CPU and on CUDA.

A kernel body is a *row function* ``row(i, args)``: it does the work of element
``i`` (one environment, one sample, ...) and ``args`` is a tuple of arrays.
Decorate it, and every helper it calls, with :func:`device_function`
(numba's ``register_jitable``): the same Python source then compiles inside a
``numba.njit`` function, inside a ``numba.cuda.jit`` kernel, and runs as plain
Python under the CUDA simulator. :class:`DualKernel` wraps a row function in
the two launchers::

    @device_function
    def scale_row(i, args):
        x, out = args
        out[i] = 2.0 * x[i]

    SCALE = DualKernel(scale_row, "scale")
    SCALE.launch(Backend.CPU, n, (x_tensor, out_tensor))   # prange over i
    SCALE.launch(Backend.CUDA, n, (x_cuda, out_cuda))      # one thread per i

Launching converts the torch tensors zero-copy (and remembers the conversion
for tensors it has seen, so a step that reuses preallocated buffers pays it
once). CUDA launches go on torch's current stream.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any

import numba
import torch
from numba import cuda
from numba.extending import register_jitable

from foxhunt.dims import DimTable
from foxhunt.kernels.backend import Backend

__all__ = ["DualKernel", "device_function", "device_constants", "CUDA_THREADS_PER_BLOCK", "SIM_THREADS_PER_BLOCK"]

CUDA_THREADS_PER_BLOCK = 256
# The simulator runs every thread of a block as a Python thread: keep blocks small.
SIM_THREADS_PER_BLOCK = 8
_CONVERSION_CACHE_SIZE = 16


def device_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as callable from CPU and CUDA kernels (and as plain Python in the simulator)."""
    return register_jitable(fn)


def _cpu_launcher(row: Callable[..., Any]) -> Callable[..., Any]:
    # Each thread walks one contiguous chunk of rows in a plain loop, so every
    # [n, ...] buffer is read in memory order and the parallel region stays one
    # call (numba's parfor passes then compile in seconds, not a minute). The
    # numpy error model (no zero-division checks, as on CUDA) keeps the two
    # targets alike and the loop free of exception branches.
    @numba.njit(error_model="numpy")
    def chunk(start, stop, args):
        for i in range(start, stop):
            row(i, args)

    @numba.njit(parallel=True, error_model="numpy")
    def launch(n, args):
        chunks = numba.get_num_threads()
        size = (n + chunks - 1) // chunks
        for c in numba.prange(chunks):
            chunk(c * size, min(n, (c + 1) * size), args)

    return launch


def _cuda_launcher(row: Callable[..., Any]) -> Any:
    # ``cuda`` must stay a module global here: the simulator swaps module globals
    # named ``cuda`` for its fake module while a kernel runs.
    @cuda.jit
    def launch(n, args):
        i = cuda.grid(1)
        if i < n:
            row(i, args)

    return launch


class DualKernel:
    """A row function compiled for the CPU (parallel numba) and for CUDA (numba.cuda).

    Compilation is lazy: the CPU launcher compiles on the first CPU launch (once
    per argument dtype signature), the CUDA kernel on the first CUDA or
    simulator launch. Warm a kernel up before capturing it in a CUDA graph.
    """

    def __init__(self, row: Callable[..., Any], name: str) -> None:
        self.row = row
        self.name = name
        self._cpu: Callable[..., Any] | None = None
        self._cuda: Any = None
        self._arrays: dict[tuple[int, ...], tuple[tuple[torch.Tensor, ...], tuple[Any, ...]]] = {}
        self._streams: dict[int, Any] = {}

    def __repr__(self) -> str:
        return f"DualKernel({self.name!r})"

    @property
    def cpu(self) -> Callable[..., Any]:
        """The CPU launcher ``launch(n, args)`` over numpy arrays."""
        if self._cpu is None:
            self._cpu = _cpu_launcher(self.row)
        return self._cpu

    @property
    def cuda(self) -> Any:
        """The CUDA kernel ``launch[blocks, threads, stream](n, args)``."""
        if self._cuda is None:
            self._cuda = _cuda_launcher(self.row)
        return self._cuda

    def _kernel_arrays(self, backend: Backend, tensors: Sequence[torch.Tensor]) -> tuple[Any, ...]:
        key = (backend is Backend.CUDA,) + tuple(id(t) for t in tensors)
        cached = self._arrays.get(key)
        if cached is not None:
            return cached[1]
        if backend is Backend.CUDA:
            arrays = tuple(cuda.as_cuda_array(t.detach()) for t in tensors)
        else:
            arrays = tuple(t.detach().numpy() for t in tensors)
        if len(self._arrays) >= _CONVERSION_CACHE_SIZE:
            self._arrays.pop(next(iter(self._arrays)))
        # Holding the tensors keeps their ids from being reused while cached.
        self._arrays[key] = (tuple(tensors), arrays)
        return arrays

    def _stream(self) -> Any:
        handle = torch.cuda.current_stream().cuda_stream
        stream = self._streams.get(handle)
        if stream is None:
            stream = cuda.external_stream(handle)
            self._streams[handle] = stream
        return stream

    def launch(self, backend: Backend | str, n: int, tensors: Sequence[torch.Tensor]) -> None:
        """Run ``row(i, arrays)`` for every ``i < n``; ``tensors`` are passed zero-copy."""
        backend = Backend(backend)
        if n <= 0:
            return
        arrays = self._kernel_arrays(backend, tensors)
        if backend is Backend.CPU:
            self.cpu(n, arrays)
        elif backend is Backend.CUDA:
            blocks = (n + CUDA_THREADS_PER_BLOCK - 1) // CUDA_THREADS_PER_BLOCK
            self.cuda[blocks, CUDA_THREADS_PER_BLOCK, self._stream()](n, arrays)
        else:
            threads = min(n, SIM_THREADS_PER_BLOCK)
            self.cuda[(n + threads - 1) // threads, threads](n, arrays)


def device_constants(table: type[DimTable]) -> tuple[int, ...]:
    """The table's members as a namedtuple of plain ints, for indexing inside kernels.

    numba.cuda does not accept ``IntEnum`` members as array indices (the CPU
    target does), while a global namedtuple is frozen into every target as a
    constant. Binding ``PS = device_constants(PS)`` in a kernel module keeps
    the source reading ``state[i, PS.EQUITY]`` on both targets.
    """
    fields = collections.namedtuple(f"{table.__name__}Index", table.names())
    return fields(*(int(member) for member in table))
