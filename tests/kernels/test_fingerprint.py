"""The row-function fingerprint that names a cached launcher: stable across processes, sensitive to what compiles."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

from foxhunt.dims import DimTable, auto
from foxhunt.kernels.fingerprint import UncacheableRow, row_fingerprint
from foxhunt_plugins.adaptive.health import HEALTH_KERNEL


def _row_reading(value):
    def row(i, args):
        args[0][i] = value[0]

    return row


def test_the_same_row_has_the_same_fingerprint_in_another_process() -> None:
    # Another process (with another string-hash seed) must name the same cache entry, or every run
    # would compile again. The health kernel reads DimTable members, helpers of another module and constants.
    script = "from foxhunt_plugins.adaptive.health import HEALTH_KERNEL; " \
             "from foxhunt.kernels.fingerprint import row_fingerprint; print(row_fingerprint(HEALTH_KERNEL.row))"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    other = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert other.stdout.strip() == row_fingerprint(HEALTH_KERNEL.row)


def test_a_constant_the_row_reads_changes_the_fingerprint() -> None:
    assert row_fingerprint(_row_reading((1.0,))) == row_fingerprint(_row_reading((1.0,)))
    assert row_fingerprint(_row_reading((1.0,))) != row_fingerprint(_row_reading((2.0,)))


def test_renamed_namedtuple_fields_change_the_fingerprint() -> None:
    # ``PS.EQUITY`` compiles to a position: swapping names over the same values is a different kernel.
    before = collections.namedtuple("Index", ["CASH", "EQUITY"])(0, 1)
    after = collections.namedtuple("Index", ["EQUITY", "CASH"])(0, 1)
    assert row_fingerprint(_row_reading(before)) != row_fingerprint(_row_reading(after))


def test_a_reordered_dim_table_changes_the_fingerprint() -> None:
    class Before(DimTable):
        LEFT = auto()
        RIGHT = auto()

    class After(DimTable):
        RIGHT = auto()
        LEFT = auto()

    def row_of(table):
        def row(i, args):
            args[0][i] = args[1][i, table.RIGHT]

        return row

    assert row_fingerprint(row_of(Before)) != row_fingerprint(row_of(After))


def test_the_launcher_template_is_part_of_the_fingerprint() -> None:
    row = _row_reading((1.0,))
    assert row_fingerprint(row, extra="template one") != row_fingerprint(row, extra="template two")


def test_a_value_without_a_stable_description_is_uncacheable() -> None:
    with pytest.raises(UncacheableRow):
        row_fingerprint(_row_reading(object()))


def _intrinsic_row(emit_one: bool):
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def constant(typingctx):
        def codegen(context, builder, signature, args):
            return context.get_constant(types.float64, 1.0 if emit_one else 2.0)

        return types.float64(), codegen

    def row(i, args):
        args[0][i] = constant()

    return row


def test_an_intrinsic_the_row_calls_is_followed() -> None:
    assert row_fingerprint(_intrinsic_row(True)) != row_fingerprint(_intrinsic_row(False))
