"""The environment step kernel a run uses: the one ``KernelPoint.ENV_STEP`` kernel of its enabled plugins.

Training, the validation and test backtests of a run, and ``foxhunt backtest`` of its checkpoints all step
through the kernel chosen here, so a plugin that replaces the physics is what every reported figure measures.
"""

from __future__ import annotations

from collections.abc import Iterable

from foxhunt.errors import FoxhuntError
from foxhunt.plugin.records import Kernel, KernelPoint

__all__ = ["env_step_kernel"]


def env_step_kernel(kernels: Iterable[Kernel]) -> Kernel:
    """The single ``ENV_STEP`` kernel among ``kernels`` (the enabled plugins' records); none or several is an error."""
    candidates = [kernel for kernel in kernels if kernel.point is KernelPoint.ENV_STEP]
    if len(candidates) != 1:
        names = ", ".join(kernel.name for kernel in candidates) or "none"
        raise FoxhuntError(
            f"a run needs exactly one environment kernel (KernelPoint.ENV_STEP); the enabled plugins give {names}. "
            "Enable the market_env plugin (or one replacement) in [plugins]."
        )
    return candidates[0]
