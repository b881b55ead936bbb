"""CSV and Parquet files, valid and damaged, never give a traceback or a hang (foxhunt/data/tabular.py).

Each example starts from valid bars written in one of the shapes real exports have, applies structured
mutations and byte damage (tabular_files.py says which), and loads it with the options a user might
pass. The load must give a valid MarketData or one foxhunt error naming the file
(fuzz_inputs.expect_market_or_error).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from fuzz_inputs import expect_market_or_error, more_examples
from hypothesis import given
from hypothesis import strategies as st
from tabular_files import _NUMERIC_TYPES, _RETYPED, TIMEZONES, _numbers, csv_files, mutate_table, parquet_files

from foxhunt.data import load, load_parquet

_counter = itertools.count()
# "Exception ignored in ..." is a traceback on stderr too (a library callback that failed): an error here.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-tabular")


def _write(scratch: Path, data: bytes, suffix: str) -> Path:
    path = scratch / f"bars_{next(_counter)}{suffix}"
    path.write_bytes(data)
    return path


@more_examples()
@given(csv_files())
def test_a_fuzzed_csv_loads_or_is_one_foxhunt_error(scratch: Path, case: tuple[bytes, str, dict]) -> None:
    data, suffix, options = case
    path = _write(scratch, data, suffix)
    expect_market_or_error(lambda: load(str(path), **options), path)


@more_examples()
@given(st.binary(max_size=600), st.sampled_from([".csv", ".csv.gz", ".parquet", ".pq", ".dbn", ".dbn.zst"]))
def test_raw_random_bytes_under_any_data_extension_are_one_foxhunt_error(scratch: Path, data: bytes, suffix: str) -> None:
    path = _write(scratch, data, suffix)
    expect_market_or_error(lambda: load(str(path)), path)


@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf", b"\n\n\n", b"\x00" * 64, "\ufefftime,open\n".encode("utf-16")])
@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet", ".dbn", ".dbn.zst"])
def test_empty_and_nearly_empty_files_are_one_foxhunt_error(scratch: Path, data: bytes, suffix: str) -> None:
    path = _write(scratch, data, suffix)
    assert not hasattr(expect_market_or_error(lambda: load(str(path)), path), "ohlcv")


@more_examples()
@given(parquet_files(), st.sampled_from(TIMEZONES), st.sampled_from(["error", "drop_identical"]))
def test_a_fuzzed_parquet_file_loads_or_is_one_foxhunt_error(scratch: Path, data: bytes, timezone: str, duplicates: str) -> None:
    path = _write(scratch, data, ".parquet")
    expect_market_or_error(lambda: load_parquet(path, timezone=timezone, duplicates=duplicates), path)


@pytest.mark.parametrize("target", range(len(_RETYPED)))
@pytest.mark.parametrize("kind", _NUMERIC_TYPES, ids=str)
def test_the_null_mutation_reaches_a_column_of_every_generated_type(kind, target: int) -> None:
    """The generator itself must not raise: a null put into a float16 column retyped to a dictionary raised
    ArrowNotImplementedError while generating a case, which failed the fuzz test above without testing foxhunt."""
    _, (retyped,) = mutate_table(["close"], [_numbers(np.array([1.0, 2.0, 3.0]), kind)], [("retype", 0, target)])
    _, (column,) = mutate_table(["close"], [retyped], [("null", 1, 0)])
    assert column.type == retyped.type
    assert column[1].as_py() is None
    assert [column[0].as_py(), column[2].as_py()] == [retyped[0].as_py(), retyped[2].as_py()]
