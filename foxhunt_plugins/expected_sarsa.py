"""The Expected-SARSA target policy's temperature: the ``sarsa.temperature`` ISV slot and its one setting.

With ``[learner] target_policy = "expected_sarsa"`` (off by default, unmeasured) the learner's bootstrap targets
take the expectation under ``softmax(Q/τ)`` per branch instead of the greedy next action
(``foxhunt/learner/target_policy.py``, docs/learner.md "Expected-SARSA targets"). ``τ`` is read live from the
ISV slot this plugin owns, ``sarsa.temperature`` ``[Branch]`` (normalised Q units), initialised from
``[plugins.expected_sarsa] temperature``. The slot is declared whether or not the learner reads it: a layout
depends on the code alone, so switching the target policy never changes a run's fingerprint; with the greedy
default nothing reads it and it costs 4 floats. Training-persist: a fold reset keeps the configured value. Without
this plugin (``plugins.disable``) the learner uses :data:`~foxhunt.contract.SARSA_TEMPERATURE_FALLBACK`, this
plugin's default.
"""

from __future__ import annotations

import attrs

from foxhunt import Branch, Registrar, ResetCategory, hookimpl
from foxhunt.contract import SARSA_TEMPERATURE, SARSA_TEMPERATURE_FALLBACK

__all__ = ["NAME", "TEMPERATURE", "ExpectedSarsaSettings", "foxhunt_declare"]

NAME = "expected_sarsa"
TEMPERATURE = SARSA_TEMPERATURE  # ISV [Branch]: τ of the target policy softmax(Q/τ)


def _positive_finite(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 < value < float("inf"):
        raise ValueError(f"{attribute.name} must be a finite number > 0, got {value!r}")


@attrs.frozen
class ExpectedSarsaSettings:
    """``[plugins.expected_sarsa]``: ``temperature``, τ of every branch (normalised Q units; 1 = one PopArt σ)."""

    temperature: float = attrs.field(default=SARSA_TEMPERATURE_FALLBACK, validator=_positive_finite)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    settings = registrar.settings(ExpectedSarsaSettings)
    temperature = (ExpectedSarsaSettings() if settings is None else settings).temperature
    registrar.slot(TEMPERATURE, width=len(Branch), init=temperature,
                   doc="softmax temperature τ of the Expected-SARSA target policy [Branch] (normalised Q units)")
    registrar.state(TEMPERATURE, ResetCategory.TRAINING_PERSIST,
                    doc="[plugins.expected_sarsa] temperature, its initial value, kept for the run")
