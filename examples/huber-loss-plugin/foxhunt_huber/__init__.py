"""foxhunt-huber-loss: a Huber TD loss component for foxhunt, as a third-party plugin.

This module is the plugin: the ``foxhunt.plugins`` entry point ``huber`` loads
it, and foxhunt calls the hook implementations below.

The component is **opt-in**. Loss budgets must sum to 1 over the enabled
components (invariant 9), and foxhunt's built-in losses already do, so a loss
that joined every run by merely being installed would break every run. The
component is returned only when the run asks for it by name:

- ``[learner.budgets] huber = ...`` gives it a budget (the usual way: adding a
  loss always means re-balancing the budgets, so the budget is the switch), or
- ``[plugins] enable`` lists ``huber`` explicitly.
"""

from __future__ import annotations

from typing import Any

from foxhunt import LossComponent, hookimpl
from foxhunt_huber.loss import huber, huber_loss, td_error

__all__ = ["NAME", "DEFAULT_BUDGET", "FOXHUNT_AUDIT", "enabled", "foxhunt_loss_components", "huber", "huber_loss"]

NAME = "huber"
DEFAULT_BUDGET = 0.15  # the share of max_grad_norm it takes when [learner.budgets] does not say

# This plugin's audit row, shipped with the code so `foxhunt audit check` finds it in any environment;
# docs/audits/components.md holds the same row for the pre-commit hook (tests/test_audit.py keeps them equal).
FOXHUNT_AUDIT = """
| component | kind | plugin | status | tests |
|---|---|---|---|---|
| `huber` | loss | huber (foxhunt_huber) | wired | tests/test_huber.py, tests/test_huber_conformance.py |
"""


def enabled(config: Any) -> bool:
    """Whether the run asked for the Huber loss: a ``[learner.budgets]`` entry or ``[plugins] enable``."""
    budgets = getattr(getattr(config, "learner", None), "budgets", None) or {}
    enable = getattr(getattr(config, "plugins", None), "enable", None) or ()
    return NAME in budgets or NAME in enable


@hookimpl
def foxhunt_loss_components(config: Any) -> list[LossComponent]:
    if not enabled(config):
        return []
    return [
        LossComponent(
            name=NAME,
            budget=DEFAULT_BUDGET,
            loss=huber_loss,
            description="Huber penalty (κ = 1) of the TD error of the expected Q of the taken action, per branch",
            per_sample=td_error,
        )
    ]
