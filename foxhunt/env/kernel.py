"""The environment's two kernels and the functions that launch them from a KernelContext.

``ENV_STEP`` advances every environment by one bar in one launch; ``ENV_RESET``
starts a new episode in every environment. Both take the same argument tuple,
read from the context's signals by the names in :data:`ENV_SIGNALS`, so the
plugin's :class:`foxhunt.plugin.records.Kernel` and :class:`foxhunt.env.VectorEnv`
run exactly the same compiled code.
"""

from __future__ import annotations

from foxhunt import contract
from foxhunt.env.physics import env_reset_row, env_step_row
from foxhunt.kernels.context import KernelContext
from foxhunt.kernels.dual import DualKernel

__all__ = ["ENV_SIGNALS", "ENV_STEP", "ENV_RESET", "launch_env_kernel", "run_env_step", "run_env_reset"]

# Signal names, in the order of the kernel argument tuple (see foxhunt.env.physics).
ENV_SIGNALS = (
    contract.ENV_PRICES,
    contract.ENV_FEATURES,
    contract.ENV_STATE,
    contract.ENV_RNG,
    contract.ENV_ACTIONS,
    contract.ENV_PARAMS,
    contract.ENV_HEALTH,
    contract.ENV_OBS,
    contract.ENV_REWARD,
    contract.ENV_DONE,
)
_STATE = ENV_SIGNALS.index(contract.ENV_STATE)

# 64 threads per block and no register cap: with float32 arithmetic the step needs 56 registers per thread;
# on an H200 a cap of 48 gained nothing and blocks of 64 were the fastest of 64..256 at a million environments
# (docs/kernels.md, "Memory layout and launch shape" and "Float32 arithmetic").
ENV_STEP = DualKernel(env_step_row, "market_env.step", threads_per_block=64)
ENV_RESET = DualKernel(env_reset_row, "market_env.reset")


def launch_env_kernel(kernel: DualKernel, context: KernelContext) -> None:
    """Launch ``kernel`` (a step or reset row function's DualKernel) over every environment in ``context.signals``."""
    tensors = tuple(context.signal(name) for name in ENV_SIGNALS)
    kernel.launch(context.backend, tensors[_STATE].shape[0], tensors)


def run_env_step(context: KernelContext) -> None:
    """Advance every environment in ``context.signals`` by one bar (one launch, no host sync)."""
    launch_env_kernel(ENV_STEP, context)


def run_env_reset(context: KernelContext) -> None:
    """Start a new episode in every environment in ``context.signals``."""
    launch_env_kernel(ENV_RESET, context)
