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
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numba
import torch
from numba import cuda
from numba.extending import register_jitable

from foxhunt.dims import DimTable
from foxhunt.kernels.backend import Backend, simulator_enabled
from foxhunt.kernels.fingerprint import enums_read
from foxhunt.kernels.launcher_cache import CachedLauncher, cpu_launcher

__all__ = ["DualKernel", "device_function", "device_constants", "quiet_launch_configuration", "LOW_OCCUPANCY_WARNING",
           "CUDA_THREADS_PER_BLOCK", "SIM_THREADS_PER_BLOCK"]

CUDA_THREADS_PER_BLOCK = 256
# The simulator runs every thread of a block as a Python thread: keep blocks small.
SIM_THREADS_PER_BLOCK = 8
_CONVERSION_CACHE_SIZE = 16
# The start of numba's message for a grid of few blocks (numba/cuda/dispatcher.py, _LaunchConfiguration),
# after the terminal highlighting (ANSI escapes) that numba puts in front of its warnings' text.
LOW_OCCUPANCY_WARNING = r"(\x1b\[[0-9;]*m)*Grid size \d+ will likely result in GPU under-utilization"


def device_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as callable from CPU and CUDA kernels (and as plain Python in the simulator)."""
    return register_jitable(fn)


def _cuda_launcher(row: Callable[..., Any], max_registers: int | None) -> Any:
    # ``cuda`` must stay a module global here: the simulator swaps module globals
    # named ``cuda`` for its fake module while a kernel runs.
    # The simulator's jit takes no register cap (it runs Python, registers mean nothing there).
    options = {} if max_registers is None or simulator_enabled() else {"max_registers": max_registers}

    @cuda.jit(**options)
    def launch(n, args):
        i = cuda.grid(1)
        if i < n:
            row(i, args)

    return launch


class DualKernel:
    """A row function compiled for the CPU (parallel numba) and for CUDA (numba.cuda).

    Compilation is lazy: the CPU launcher compiles on the first CPU launch (once
    per argument dtype signature) or loads from the on-disk kernel cache
    (:mod:`foxhunt.kernels.launcher_cache`), the CUDA kernel compiles on the
    first CUDA or simulator launch. Warm a kernel up before capturing it in a
    CUDA graph.

    ``threads_per_block`` and ``max_registers`` shape the CUDA launch: a kernel
    with many live values per thread can run faster with its registers capped,
    because more threads fit on each multiprocessor to hide memory latency.
    """

    def __init__(self, row: Callable[..., Any], name: str, *, threads_per_block: int = CUDA_THREADS_PER_BLOCK,
                 max_registers: int | None = None) -> None:
        if not 32 <= threads_per_block <= 1024 or threads_per_block % 32:
            raise ValueError(f"threads_per_block must be a multiple of 32 in 32..1024, got {threads_per_block}")
        tables = enums_read(row)
        if tables:
            # Refused here, on any machine: otherwise the row compiles on the CPU and fails only on a GPU.
            suggestion = tables[0].rsplit(".", 1)[-1]
            raise ValueError(
                f"kernel {name!r} reads {', '.join(tables)}: an IntEnum table or member, which numba.cuda cannot "
                f"use as an array index (the CPU target can, so the kernel would fail only on a GPU). Bind a "
                f"plain-int copy in the kernel's module, e.g. `INDEX = device_constants({suggestion})` "
                f"(foxhunt.kernels), and index with it (docs/kernels.md)."
            )
        self.row = row
        self.name = name
        # CUDA launch shape (docs/kernels.md, "Launch shape"): the simulator ignores both.
        self.threads_per_block = threads_per_block
        self.max_registers = max_registers
        self._cpu: CachedLauncher | None = None
        self._cuda: Any = None
        self._arrays: dict[tuple[int, ...], tuple[tuple[torch.Tensor, ...], tuple[Any, ...]]] = {}
        self._launches: dict[tuple[int, int], Any] = {}

    def __repr__(self) -> str:
        return f"DualKernel({self.name!r})"

    @property
    def cpu(self) -> Callable[..., Any]:
        """The CPU launcher ``launch(n, chunks, args)`` over numpy arrays (a numba dispatcher; ``chunks``: threads)."""
        return self.cpu_cache.launch

    @property
    def cpu_cache(self) -> CachedLauncher:
        """The CPU launcher with its place in the on-disk kernel cache."""
        if self._cpu is None:
            self._cpu = cpu_launcher(self.row, self.name)
        return self._cpu

    def _launch_cpu(self, n: int, arrays: tuple[Any, ...]) -> None:
        launch = self.cpu_cache.launch
        compiled = len(launch.overloads)
        launch(n, numba.get_num_threads(), arrays)
        if len(launch.overloads) != compiled:
            # A new dtype signature was compiled (and saved to disk) or loaded from it.
            self.cpu_cache.new_overload()

    @property
    def cuda(self) -> Any:
        """The CUDA kernel ``launch[blocks, threads, stream](n, args)``."""
        if self._cuda is None:
            self._cuda = _cuda_launcher(self.row, self.max_registers)
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

    def _configured(self, blocks: int) -> Any:
        """``self.cuda[blocks, threads, stream]`` on torch's current stream, configured once per (grid, stream)."""
        handle = torch.cuda.current_stream().cuda_stream
        configured = self._launches.get((blocks, handle))
        if configured is None:
            configured = quiet_launch_configuration(self.cuda, blocks, self.threads_per_block, cuda.external_stream(handle))
            self._launches[(blocks, handle)] = configured
        return configured

    def launch(self, backend: Backend | str, n: int, tensors: Sequence[torch.Tensor]) -> None:
        """Run ``row(i, arrays)`` for every ``i < n``; ``tensors`` are passed zero-copy."""
        backend = Backend(backend)
        if n <= 0:
            return
        arrays = self._kernel_arrays(backend, tensors)
        if backend is Backend.CPU:
            self._launch_cpu(n, arrays)
        elif backend is Backend.CUDA:
            blocks = (n + self.threads_per_block - 1) // self.threads_per_block
            self._configured(blocks)(n, arrays)
        else:
            threads = min(n, SIM_THREADS_PER_BLOCK)
            self.cuda[(n + threads - 1) // threads, threads](n, arrays)


def quiet_launch_configuration(kernel: Any, blocks: int, threads: int, stream: Any) -> Any:
    """``kernel[blocks, threads, stream]`` without numba's low-occupancy advice.

    numba warns "Grid size N will likely result in GPU under-utilization" for any
    grid under 128 blocks, when the launch is configured. foxhunt's ISV kernels
    run one row per branch or one row in all, on purpose: the grid is as large as
    the work, and the advice would print on every run. Only that warning, and
    only here, is silenced; every other warning still reaches the user.
    """
    with warnings.catch_warnings():
        # Matched by message alone: numba-cuda (the CUDA target's newer home) raises
        # it with its own NumbaPerformanceWarning class.
        warnings.filterwarnings("ignore", message=LOW_OCCUPANCY_WARNING)
        return kernel[blocks, threads, stream]


def device_constants(table: type[DimTable]) -> tuple[int, ...]:
    """The table's members as a namedtuple of plain ints, for indexing inside kernels.

    numba.cuda does not accept ``IntEnum`` members as array indices (the CPU
    target does), while a global namedtuple is frozen into every target as a
    constant. Binding ``PS = device_constants(PS)`` in a kernel module keeps
    the source reading ``state[i, PS.EQUITY]`` on both targets.
    """
    fields = collections.namedtuple(f"{table.__name__}Index", table.names())
    return fields(*(int(member) for member in table))
