"""Validators and converters shared by the adaptive plugins' settings classes (not a plugin).

Each adaptive plugin declares its ``[plugins.<name>]`` settings as a frozen
attrs class (``registrar.settings``); the per-branch fields hold one value per
action branch (:class:`~foxhunt.actions.Branch`), in its order.
"""

from __future__ import annotations

from typing import Any

import attrs

from foxhunt import Branch

__all__ = ["positive", "non_negative", "unit", "rate", "per_branch", "branch_width", "all_unit", "all_positive",
           "branch_unit"]

positive = attrs.validators.gt(0.0)
non_negative = attrs.validators.ge(0.0)
unit = [attrs.validators.ge(0.0), attrs.validators.le(1.0)]
rate = [attrs.validators.gt(0.0), attrs.validators.le(1.0)]


def per_branch(value: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in value)


def branch_width(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if len(value) != len(Branch):
        names = ", ".join(Branch.names())
        raise ValueError(f"{attribute.name} needs one value per branch ({names}), got {len(value)}")


def all_unit(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if any(not 0.0 <= v <= 1.0 for v in value):
        raise ValueError(f"{attribute.name} values must lie in [0, 1], got {value!r}")


def all_positive(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if any(not v > 0.0 for v in value):
        raise ValueError(f"{attribute.name} values must be > 0, got {value!r}")


branch_unit = [branch_width, all_unit]
