"""The environment step kernel a run uses: the one ``KernelPoint.ENV_STEP`` kernel of its enabled plugins.

Training, the validation and test backtests of a run, and ``foxhunt backtest`` of its checkpoints all step
through the kernel chosen here, so a plugin that replaces the physics is what every reported figure measures.
A kernel that names another in ``Kernel.replaces`` takes its place (the trade_plans plugin's step replaces
``market_env.step``); the replaced kernel's plugin still owns the environment's state.
"""

from __future__ import annotations

from collections.abc import Iterable

from foxhunt.errors import FoxhuntError
from foxhunt.plugin.records import Kernel, KernelPoint

__all__ = ["env_step_kernel", "replaced_kernels"]


def env_step_kernel(kernels: Iterable[Kernel]) -> Kernel:
    """The single ``ENV_STEP`` kernel among ``kernels`` (the enabled plugins' records) that no other replaces
    (``Kernel.replaces``); none or several is an error."""
    candidates = [kernel for kernel in kernels if kernel.point is KernelPoint.ENV_STEP]
    replaced = {kernel.replaces for kernel in candidates if kernel.replaces}
    remaining = [kernel for kernel in candidates if kernel.name not in replaced]
    if len(remaining) != 1:
        names = ", ".join(kernel.name for kernel in remaining) or "none"
        raise FoxhuntError(
            f"a run needs exactly one environment kernel (KernelPoint.ENV_STEP); the enabled plugins give {names}. "
            "Enable the market_env plugin (or one replacement) in [plugins]."
        )
    return remaining[0]


def replaced_kernels(chosen: Kernel, kernels: Iterable[Kernel]) -> list[Kernel]:
    """The ``ENV_STEP`` kernels ``chosen`` replaces, directly or through the kernels it replaces."""
    by_name = {kernel.name: kernel for kernel in kernels if kernel.point is KernelPoint.ENV_STEP}
    found: list[Kernel] = []
    name = chosen.replaces
    while name and name in by_name and by_name[name] not in found:
        found.append(by_name[name])
        name = by_name[name].replaces
    return found
