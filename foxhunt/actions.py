"""The agent's factored action space, as named-dimension tables.

An action is one choice per branch. The network has one advantage head per
branch; the environment turns the four choices into an order. Every index into
an action tensor goes through these tables (invariant 5).
"""

from __future__ import annotations

from foxhunt.dims import DimTable, auto

__all__ = ["Branch", "Direction", "Magnitude", "OrderType", "Urgency", "BRANCH_TABLES", "branch_sizes"]


class Branch(DimTable):
    """Action branches: columns of an action tensor ``[batch, Branch]``."""

    DIRECTION = auto()
    MAGNITUDE = auto()
    ORDER_TYPE = auto()
    URGENCY = auto()


class Direction(DimTable):
    """Direction branch. HOLD keeps the current position, FLAT closes it."""

    SHORT = auto()
    HOLD = auto()
    LONG = auto()
    FLAT = auto()


class Magnitude(DimTable):
    """Magnitude branch: fraction of the position cap a SHORT or LONG targets."""

    QUARTER = auto()
    HALF = auto()
    FULL = auto()


class OrderType(DimTable):
    """Order-type branch: how the target position is executed."""

    MARKET = auto()
    LIMIT = auto()


class Urgency(DimTable):
    """Urgency branch: trades fill probability against price (see docs/fill-model.md)."""

    PASSIVE = auto()
    NORMAL = auto()
    AGGRESSIVE = auto()


BRANCH_TABLES: dict[Branch, type[DimTable]] = {
    Branch.DIRECTION: Direction,
    Branch.MAGNITUDE: Magnitude,
    Branch.ORDER_TYPE: OrderType,
    Branch.URGENCY: Urgency,
}


def branch_sizes() -> tuple[int, ...]:
    """Number of sub-actions per branch, in ``Branch`` order."""
    return tuple(BRANCH_TABLES[branch].size() for branch in Branch)
