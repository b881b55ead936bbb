"""Per-branch exploration rate ε: a linear decay over the fold plus a boost as health falls.

``ε_sched_b = end_b + (start_b − end_b) × max(0, 1 − p / decay_fraction)`` over
training progress ``p`` (slot ``train.progress``), and
``ε_b = min(ceiling, ε_sched_b + health_boost × (1 − health))``.

Why the boost: an unhealthy learner tends to confirm its own estimates on
the data its greedy policy generates; more exploration brings in transitions
that contradict them. The environment's policy reads ``epsilon.branch`` (one
rate per action branch) when it samples actions. One device row per branch,
after every learner update; ``health.value`` defaults to 1 when the health
plugin is not loaded.
"""

from __future__ import annotations

from typing import Any

from foxhunt.actions import Branch
from foxhunt.adaptive_config import adaptive_config_of
from foxhunt.core_declarations import PROGRESS
from foxhunt.dims import DimTable, auto
from foxhunt.hookspecs import hookimpl
from foxhunt.kernels import DualKernel, device_function
from foxhunt.monitors import MONITOR_STATE_PREFIX, AdaptiveMonitor, reset_monitor
from foxhunt.records import Kernel, KernelPoint
from foxhunt.registrar import Registrar
from foxhunt.state import ResetCategory
from foxhunt_plugins.adaptive.common import N_BRANCHES, BoundRun, clamp, param_tensor, read_or, slot_offsets

__all__ = ["VALUE", "EPSILON_INIT", "EpsilonSlot", "EpsilonParam", "EpsilonMonitor", "EPSILON_KERNEL",
           "epsilon_params", "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

VALUE = "epsilon.branch"
HEALTH = "health.value"
EPSILON_INIT = 1.0  # before a fold's first update the Q-network has learnt nothing of this fold: explore fully


class EpsilonSlot(DimTable):
    """Positions in the ε kernel's slot-offset vector."""

    VALUE = auto()
    PROGRESS = auto()
    HEALTH = auto()


class EpsilonParam(DimTable):
    """Columns of the ε kernel's parameter table ``[Branch, EpsilonParam]``."""

    START = auto()
    END = auto()
    DECAY_FRACTION = auto()
    HEALTH_BOOST = auto()
    CEILING = auto()


@device_function
def _epsilon_row(b, args):
    isv, off, prm = args
    progress = clamp(isv[off[EpsilonSlot.PROGRESS]], 0.0, 1.0)
    health = clamp(read_or(isv, off[EpsilonSlot.HEALTH], 1.0), 0.0, 1.0)
    end = prm[b, EpsilonParam.END]
    remaining = max(0.0, 1.0 - progress / prm[b, EpsilonParam.DECAY_FRACTION])
    scheduled = end + (prm[b, EpsilonParam.START] - end) * remaining
    boosted = scheduled + prm[b, EpsilonParam.HEALTH_BOOST] * (1.0 - health)
    isv[off[EpsilonSlot.VALUE] + b] = clamp(boosted, 0.0, prm[b, EpsilonParam.CEILING])


EPSILON_KERNEL = DualKernel(_epsilon_row, "epsilon.update")


def epsilon_params(config: Any) -> list[list[float]]:
    """Parameter table ``[Branch, EpsilonParam]``."""
    cfg = adaptive_config_of(config).epsilon
    table = [[0.0] * EpsilonParam.size() for _ in Branch]
    for branch in Branch:
        row = table[branch]
        row[EpsilonParam.START] = cfg.start[branch]
        row[EpsilonParam.END] = cfg.end[branch]
        row[EpsilonParam.DECAY_FRACTION] = cfg.decay_fraction
        row[EpsilonParam.HEALTH_BOOST] = cfg.health_boost
        row[EpsilonParam.CEILING] = cfg.ceiling
    return table


class EpsilonMonitor(AdaptiveMonitor):
    """Observes the per-branch exploration rates."""

    name = "epsilon"
    reads = (VALUE,)
    labels = {VALUE: Branch.names()}


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.slot(VALUE, width=len(Branch), init=EPSILON_INIT,
                   doc="exploration rate per action branch [Branch], read by the policy when it samples actions")
    registrar.state(VALUE, ResetCategory.FOLD_RESET, doc="recomputed from progress and health at every update")
    registrar.state(MONITOR_STATE_PREFIX + EpsilonMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the ε monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any) -> list[Kernel]:
    params = epsilon_params(config)

    def bind(context):
        offsets = slot_offsets(context, (VALUE, PROGRESS, HEALTH), optional=(HEALTH,))
        return [(EPSILON_KERNEL, N_BRANCHES, (context.isv, offsets, param_tensor(params, context)))]

    return [
        Kernel(
            name="epsilon.update",
            point=KernelPoint.STEP,
            run=BoundRun(bind),
            description="per-branch exploration: linear decay over train.progress plus a boost as health falls",
            writes=(VALUE,),
            reads=(PROGRESS, HEALTH),
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [EpsilonMonitor()]
