"""Named-dimension tables: one place that names every position in a multi-field buffer.

A table is an :class:`enum.IntEnum` whose members count from 0 in declaration
order. Members are plain ints, so the same name works everywhere::

    class PS(DimTable):
        '''Portfolio state, one row per environment.'''
        POSITION = auto()
        CASH = auto()

    state[:, PS.CASH]          # torch / numpy
    state[i, PS.CASH]          # numba njit: IntEnum members are compile-time constants

numba.cuda (numba-cuda on a real GPU) cannot index an array with an IntEnum
member, so CUDA kernels take ``foxhunt.kernels.device_constants(PS)``: a
namedtuple of plain ints with the same member names, so kernel source still
reads ``state[i, PS.CASH]``.

The raw number appears only here, at the definition site (invariant 5). Plugins
hand their tables to the registrar (``registrar.dims(PS)``) so the tables are
exported to ``registry/dims.toml`` and to the docs.
"""

from __future__ import annotations

import enum
from enum import auto

__all__ = ["DimTable", "auto", "table_as_dict"]


class DimTable(enum.IntEnum):
    """Base class of every named-dimension table (members count from 0)."""

    @staticmethod
    def _generate_next_value_(name, start, count, last_values):  # noqa: ARG004 - enum protocol
        return count

    @classmethod
    def size(cls) -> int:
        """Number of named positions (the buffer's width along this dimension)."""
        return len(cls.__members__)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Member names in index order."""
        return tuple(member.name for member in cls)


def table_as_dict(table: type[DimTable]) -> dict[str, int]:
    """The table as ``{name: index}`` in index order, for snapshots and docs."""
    return {member.name: int(member) for member in table}
