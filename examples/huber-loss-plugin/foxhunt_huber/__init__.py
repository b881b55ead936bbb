"""foxhunt-huber-loss: a Huber TD loss component for foxhunt, as a third-party plugin.

This module is the plugin: the ``foxhunt.plugins`` entry point ``huber`` loads
it, and foxhunt calls the hook implementations below.

It declares its own settings, :class:`HuberSettings`, which users set under
``[plugins.huber]`` (or ``--set plugins.huber.KEY=VALUE``): ``enabled`` switches
the component on, ``kappa`` is the Huber threshold κ. The component is
**opt-in**: loss budgets must sum to 1 over the enabled components (invariant
9), and foxhunt's built-in losses already do, so a loss that joined every run
by merely being installed would break every run. Switching it on therefore
goes with a re-balance of ``[learner.budgets]`` (the README shows one).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import attrs

from foxhunt import LossComponent, Registrar, hookimpl
from foxhunt_huber.loss import KAPPA, huber, huber_loss, td_error

__all__ = ["NAME", "DEFAULT_BUDGET", "FOXHUNT_AUDIT", "HuberSettings", "foxhunt_declare", "foxhunt_loss_components",
           "huber", "huber_loss"]

NAME = "huber"
DEFAULT_BUDGET = 0.15  # the share of max_grad_norm it takes when [learner.budgets] does not say

# This plugin's audit row, shipped with the code so `foxhunt audit check` finds it in any environment;
# docs/audits/components.md holds the same row for the pre-commit hook (tests/tooling/test_audit.py keeps them equal).
FOXHUNT_AUDIT = """
| component | kind | plugin | status | tests |
|---|---|---|---|---|
| `huber` | loss | huber (foxhunt_huber) | wired | tests/test_huber.py, tests/test_huber_conformance.py |
"""


def _positive_finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"'{attribute.name}' must be a finite number > 0: {value!r}")


@attrs.frozen
class HuberSettings:
    """``[plugins.huber]``: whether the run uses the Huber loss, and its threshold."""

    enabled: bool = False  # opt-in: the built-in budgets already sum to 1
    kappa: float = attrs.field(default=KAPPA, validator=_positive_finite)  # PopArt-normalised return units


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(HuberSettings)


@hookimpl
def foxhunt_loss_components(config: Any, settings: HuberSettings) -> list[LossComponent]:
    if not settings.enabled:
        return []
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=functools.partial(huber_loss, kappa=settings.kappa),
            description=f"Huber penalty (κ = {settings.kappa:g}) of the TD error of the expected Q of the taken action, "
                        "per branch",
            per_sample=td_error,
        )
    ]
