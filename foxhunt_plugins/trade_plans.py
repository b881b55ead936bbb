"""Built-in plugin: trade plans, opt-in (``[plugins.trade_plans] enabled = true``).

A plan is the intent an entry carries across bars: a stop and a target at fixed fractions of the entry's fill
price, a horizon in bars, and the entry's conviction (the share of the cap its magnitude asked for). While the
agent holds a position its plan's exits work on every bar; an action that changes the position is executed
instead. The physics is the core's (:mod:`foxhunt.env.plans`, docs/fill-model.md "Trade plans").

Enabled, the plugin returns the environment kernel ``trade_plans.step``, which replaces ``market_env.step``
(``Kernel.replaces``): training, the validation and test backtests and ``foxhunt backtest`` of a checkpoint all
step through it, with the run's ISV. It also returns a construct kernel that writes ``stop``, ``target`` and
``horizon`` into ``trade_plans.params``. Off, it returns no kernel and the run steps with ``market_env.step``.

It declares, on or off (a layout depends on the code alone, so switching plans never changes a run's
fingerprint; off, the two slots cost 4 floats and nothing reads them):

- ``trade_plans.params`` ``[PLAN_PARAM]``: stop and target distances (fractions of the entry price) and the
  horizon (bars); training-persist;
- ``trade_plans.threshold`` ``[1]``: the conviction an entry needs for its plan to open, initialised from
  ``threshold``; training-persist, an adaptive plugin may move it while the run trains;
- the ``PLAN_PARAM`` table (the plan rows' table ``PLAN`` is the environment plugin's, which owns the buffer and
  its fold reset).
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import torch

from foxhunt import Kernel, KernelPoint, Registrar, ResetCategory, hookimpl
from foxhunt.contract import ENV_PLAN, PLAN_PARAMS, PLAN_THRESHOLD
from foxhunt.env.kernel import ENV_SIGNALS
from foxhunt.env.plans import run_plan_step
from foxhunt.env.tables import PLAN_PARAM

__all__ = ["NAME", "TradePlansSettings", "plan_params", "foxhunt_declare", "foxhunt_kernels"]

NAME = "trade_plans"
WRITE_KERNEL = "trade_plans.write_params"
STEP_KERNEL = "trade_plans.step"
MARKET_STEP = "market_env.step"  # the kernel this plugin's step replaces: its name is the contract between them


def _fraction(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < 1.0:
        raise ValueError(f"{attribute.name} must be a fraction of the entry price in [0, 1) (0: off), got {value!r}")


def _non_negative_finite(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0.0 <= value and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be a finite number >= 0 (0: off), got {value!r}")


def _bars(instance: object, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be a whole number of bars >= 0 (0: off), got {value!r}")


def _share(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be a share of the cap in [0, 1], got {value!r}")


@attrs.frozen
class TradePlansSettings:
    """``[plugins.trade_plans]``: the plan every entry carries (docs/fill-model.md, "Trade plans").

    ``stop`` and ``target`` are distances from the entry's fill price as fractions of it (0.01: one per cent),
    ``horizon`` the bars a position may be held; 0 turns each off. ``threshold`` is the conviction (share of the
    cap: 0.25, 0.5 or 1) an entry needs for its plan to open; 0 gives every entry a plan. Choose the distances
    from the market's volatility per bar: a stop inside one bar's usual range closes most positions on the bar
    after they open.
    """

    enabled: bool = False
    stop: float = attrs.field(default=0.01, validator=_fraction)
    target: float = attrs.field(default=0.02, validator=_non_negative_finite)
    horizon: int = attrs.field(default=0, validator=_bars)
    threshold: float = attrs.field(default=0.0, validator=_share)


def plan_params(settings: TradePlansSettings) -> list[float]:
    """The ``PLAN_PARAM`` vector of ``settings``."""
    values = [0.0] * PLAN_PARAM.size()
    values[PLAN_PARAM.STOP] = float(settings.stop)
    values[PLAN_PARAM.TARGET] = float(settings.target)
    values[PLAN_PARAM.HORIZON] = float(settings.horizon)
    return values


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    settings = registrar.settings(TradePlansSettings) or TradePlansSettings()
    registrar.dims(PLAN_PARAM)
    registrar.slot(PLAN_PARAMS, width=PLAN_PARAM.size(),
                   doc="trade plans' stop and target (fractions of the entry price) and horizon (bars) [PLAN_PARAM]")
    registrar.state(PLAN_PARAMS, ResetCategory.TRAINING_PERSIST,
                    doc="written once when the run is built from [plugins.trade_plans] stop, target, horizon")
    registrar.slot(PLAN_THRESHOLD, init=settings.threshold,
                   doc="conviction (share of the cap) an entry needs for its trade plan to open")
    registrar.state(PLAN_THRESHOLD, ResetCategory.TRAINING_PERSIST,
                    doc="[plugins.trade_plans] threshold, its initial value, kept for the run")


@hookimpl
def foxhunt_kernels(config: Any, settings: TradePlansSettings) -> list[Kernel]:
    if not settings.enabled:
        return []
    values = plan_params(settings)

    def write_params(context: Any) -> None:
        context.isv_slot(PLAN_PARAMS).copy_(torch.tensor(values, dtype=context.isv.dtype, device=context.device))

    return [
        Kernel(
            name=WRITE_KERNEL,
            point=KernelPoint.CONSTRUCT,
            run=write_params,
            description="writes [plugins.trade_plans] stop, target and horizon into trade_plans.params once, "
            "when the run is built",
            writes=(PLAN_PARAMS,),
        ),
        Kernel(
            name=STEP_KERNEL,
            point=KernelPoint.ENV_STEP,
            run=run_plan_step,
            description=(
                "The market environment's step with trade plans (foxhunt.env.plans, docs/fill-model.md "
                "\"Trade plans\"): while the agent holds, its plan's horizon, stop and target close the position; "
                "an entry opens a plan when its conviction reaches trade_plans.threshold. Replaces market_env.step."
            ),
            reads=(*ENV_SIGNALS, ENV_PLAN, PLAN_PARAMS, PLAN_THRESHOLD),
            replaces=MARKET_STEP,
        ),
    ]
