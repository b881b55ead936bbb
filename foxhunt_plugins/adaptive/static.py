"""Values written once into the ISV when a run is built: no schedule, no monitor.

``cql.alpha``: the strength of the conservative (CQL) penalty, from
``[plugins.static] cql_alpha`` — the one key that sets it (the cql loss reads
the slot). It lives in the ISV rather than in a Python float so the learner
reads it on the device like every other adaptive value, and a later mechanism
could move it without touching the learner. Written by a one-row device kernel
at ``KernelPoint.CONSTRUCT``; training-persist, since a fold reset must not
undo the configured value. Without this plugin the learner uses the constant
:data:`~foxhunt.contract.CQL_ALPHA_FALLBACK`, this plugin's default.
"""

from __future__ import annotations

from typing import Any

import attrs

from foxhunt import DimTable, Kernel, KernelPoint, Registrar, ResetCategory, auto, hookimpl
from foxhunt.contract import CQL_ALPHA, CQL_ALPHA_FALLBACK
from foxhunt.kernels import DualKernel, device_constants, device_function
from foxhunt_plugins.adaptive.common import BoundRun, param_tensor, slot_offsets
from foxhunt_plugins.adaptive.validators import non_negative

__all__ = ["StaticSettings", "CQL_ALPHA", "CQL_ALPHA_INIT", "StaticSlot", "StaticParam", "STATIC_KERNEL", "static_params",
           "foxhunt_declare", "foxhunt_kernels"]

CQL_ALPHA_INIT = CQL_ALPHA_FALLBACK  # the default α; the construct kernel writes the configured one


class StaticSlot(DimTable):
    """Positions in the static kernel's slot-offset vector."""

    CQL_ALPHA = auto()


class StaticParam(DimTable):
    """Positions in the static kernel's parameter vector."""

    CQL_ALPHA = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
STATIC_PARAM = device_constants(StaticParam)
STATIC_SLOT = device_constants(StaticSlot)


@device_function
def _static_row(i, args):
    isv, off, prm = args
    isv[off[STATIC_SLOT.CQL_ALPHA]] = prm[STATIC_PARAM.CQL_ALPHA]


STATIC_KERNEL = DualKernel(_static_row, "static.write")


@attrs.frozen
class StaticSettings:
    """``[plugins.static]``: values written once into the ISV when the run is built."""

    cql_alpha: float = attrs.field(default=CQL_ALPHA_INIT, validator=non_negative)  # strength of the CQL penalty


def static_params(settings: StaticSettings) -> list[float]:
    params = [0.0] * StaticParam.size()
    params[StaticParam.CQL_ALPHA] = settings.cql_alpha
    return params


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(StaticSettings)
    registrar.slot(CQL_ALPHA, init=CQL_ALPHA_INIT, doc="strength of the conservative (CQL) penalty")
    registrar.state(CQL_ALPHA, ResetCategory.TRAINING_PERSIST, doc="written once at construction from [plugins.static] cql_alpha")


@hookimpl
def foxhunt_kernels(config: Any, settings: StaticSettings) -> list[Kernel]:
    params = static_params(settings)

    def bind(context):
        return [(STATIC_KERNEL, 1, (context.isv, slot_offsets(context, (CQL_ALPHA,)), param_tensor(params, context)))]

    return [
        Kernel(
            name="static.write",
            point=KernelPoint.CONSTRUCT,
            run=BoundRun(bind),
            description="writes the configured CQL α base into the ISV once, when the run is built",
            writes=(CQL_ALPHA,),
        )
    ]
