"""Databento DBN files, valid and damaged, never give a traceback, a Rust panic or a hang (foxhunt/data/dbn.py).

Each example is a file from dbn_files.py (valid records of one schema, mutated, damaged, compressed or
not) loaded with a bar length and maybe an instrument id. The load must give a valid MarketData or one
foxhunt error naming the file (fuzz_inputs.expect_market_or_error).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from dbn_files import SCALE, SCHEMAS, compress, dbn_files, metadata
from fuzz_inputs import expect_market_or_error, more_examples
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.data import load_dbn

_counter = itertools.count()
# "Exception ignored in ..." is a traceback on stderr too (a library callback that failed): an error here.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-dbn")


@more_examples()
@given(dbn_files(), st.sampled_from(["1s", "1m", "5m", "1h", "1d"]), st.sampled_from([None, None, 42, 7]))
def test_a_fuzzed_dbn_file_loads_or_is_one_foxhunt_error(
    scratch: Path, case: tuple[bytes, str], bar: str, instrument_id: int | None
) -> None:
    data, suffix = case
    path = scratch / f"records_{next(_counter)}{suffix}"
    path.write_bytes(data)
    expect_market_or_error(lambda: load_dbn(path, bar=bar, instrument_id=instrument_id), path)


@more_examples()
@given(st.sampled_from(list(SCHEMAS)), st.binary(max_size=800), st.sampled_from(["none", "finished"]))
def test_random_records_after_a_valid_header_are_one_foxhunt_error_or_bars(scratch: Path, schema: str, body: bytes, how: str) -> None:
    """Random bytes where the records belong: the framing check, not the decoder, meets them."""
    raw = metadata(SCHEMAS[schema][0], 1_704_187_800 * SCALE) + body
    path = scratch / f"random_{next(_counter)}{'.dbn' if how == 'none' else '.dbn.zst'}"
    path.write_bytes(raw if how == "none" else compress(raw, how))
    expect_market_or_error(lambda: load_dbn(path), path)
