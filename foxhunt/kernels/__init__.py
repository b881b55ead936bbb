"""The kernel framework: write a kernel once as a row function, run it with numba on the CPU or CUDA.

See ``docs/kernels.md`` for how to write one, how tensors reach it, and how
compiled CPU launchers are kept on disk (:func:`kernel_cache_dir`).
"""

from __future__ import annotations

from foxhunt.kernels.backend import Backend, resolve_backend, simulator_enabled
from foxhunt.kernels.context import KernelContext
from foxhunt.kernels.dual import DualKernel, device_constants, device_function
from foxhunt.kernels.launcher_cache import kernel_cache_dir
from foxhunt.kernels.rng import hash3, mix32, uniform01

__all__ = [
    "Backend",
    "DualKernel",
    "KernelContext",
    "device_constants",
    "device_function",
    "hash3",
    "kernel_cache_dir",
    "mix32",
    "resolve_backend",
    "simulator_enabled",
    "uniform01",
]
