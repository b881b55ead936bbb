"""TOML config files and ``--set`` overrides never give a traceback or a hang (foxhunt/config_loading.py).

Starting from the resolved default config written as TOML (what a run's config.toml holds), examples
put values of every TOML type at every key (huge and non-finite numbers, text, dates, arrays and
tables nested a few levels), add unknown keys, drop keys and sections, turn sections into values;
other examples damage the file's bytes, write it in another encoding or with a byte-order mark, or
are random bytes. Each must load to a config that ``check_config`` accepts or refuses with a
ConfigError, or be refused with one ConfigError naming the file; a config that loads must be
written back to the same TOML (a run's config.toml is read again on resume).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from fuzz_inputs import SECONDS_PER_LOAD, byte_damage, damage, encodings, more_examples, time_limit
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.config import FoxhuntConfig, dump_config, load_config
from foxhunt.config_checks import check_config
from foxhunt.config_loading import unstructure
from foxhunt.errors import ConfigError, PluginError

_counter = itertools.count()
# "Exception ignored in ..." is a traceback on stderr too (a library callback that failed): an error here.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


def _plain(data: Any) -> Any:
    # TOML has no null: an unset optional key is absent (as dump_config writes it).
    if isinstance(data, dict):
        return {key: _plain(value) for key, value in data.items() if value is not None}
    return data


DEFAULTS = _plain(unstructure(FoxhuntConfig()))


def _key_paths(data: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for key, value in data.items():
        paths.append((*prefix, key))
        if isinstance(value, dict):
            paths += _key_paths(value, (*prefix, key))
    return paths


KEY_PATHS = _key_paths(DEFAULTS)

_scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**63 - 1, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-320, 1e308, float("inf"), float("nan")]),
    st.text(max_size=12),
    st.sampled_from(["cuda", "cpu", "auto", "nosuch", "", "synthetic:ar1?bars=10", "minimal", "1m", "UTC"]),
    st.booleans(),
    st.dates(),
    st.datetimes(),
    st.times(),
)
toml_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=6), children, max_size=3),
    max_leaves=8,
)

_MUTATION = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEY_PATHS), toml_values),
    st.tuples(st.just("unknown"), st.sampled_from(KEY_PATHS), st.text(min_size=1, max_size=8), toml_values),
    st.tuples(st.just("delete"), st.sampled_from(KEY_PATHS)),
)


def mutate(data: dict, mutations: list[tuple]) -> dict:
    data = _copy(data)
    for kind, path, *args in mutations:
        node = data
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        if kind == "set":
            node[path[-1]] = args[0]
        elif kind == "unknown":
            node[args[0]] = args[1]
        else:
            node.pop(path[-1], None)
    return data


def _copy(data: Any) -> Any:
    return {k: _copy(v) for k, v in data.items()} if isinstance(data, dict) else data


def expect_config_or_error(scratch: Path, path: Path | None, overrides: tuple[str, ...] = ()) -> None:
    """A config that check_config accepts or refuses, or one ConfigError naming its source; nothing else."""
    try:
        with time_limit(SECONDS_PER_LOAD):
            config = load_config(path, overrides)
    except ConfigError as error:
        message = str(error)
        assert message.strip() and "Traceback" not in message
        assert str(path) in message if path is not None else "--set" in message, message
        return
    written = dump_config(config)
    again = scratch / f"written_{next(_counter)}.toml"
    again.write_text(written, encoding="utf-8")
    assert dump_config(load_config(again)) == written, "a loaded config does not survive its own config.toml"
    try:
        check_config(config)
    except ConfigError as error:
        assert str(error).startswith("this configuration cannot run:"), str(error)
    except PluginError as error:  # check_config lets the selected plugins declare: a fuzzed [plugins.<name>] table
        assert re.match(r"\d+ plugin problem\(s\) stop this run:\n", str(error)), str(error)
        assert "Traceback" not in str(error)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config")


@more_examples()
@given(st.lists(_MUTATION, min_size=1, max_size=4))
def test_a_config_with_fuzzed_values_loads_or_is_one_config_error(scratch: Path, mutations: list[tuple]) -> None:
    path = scratch / f"config_{next(_counter)}.toml"
    path.write_text(tomli_w.dumps(mutate(DEFAULTS, mutations)), encoding="utf-8")
    expect_config_or_error(scratch, path)


@more_examples()
@given(byte_damage(), encodings)
def test_a_damaged_config_file_loads_or_is_one_config_error(scratch: Path, operations: list, encoding: str) -> None:
    path = scratch / f"damaged_{next(_counter)}.toml"
    path.write_bytes(damage(dump_config(FoxhuntConfig()).encode(encoding), operations))
    expect_config_or_error(scratch, path)


@more_examples()
@given(st.binary(max_size=400) | st.text(max_size=200).map(str.encode))
def test_random_bytes_as_a_config_file_are_one_config_error_or_a_config(scratch: Path, data: bytes) -> None:
    path = scratch / f"random_{next(_counter)}.toml"
    path.write_bytes(data)
    expect_config_or_error(scratch, path)


@more_examples()
@given(st.lists(st.tuples(st.sampled_from(KEY_PATHS), toml_values | st.text(max_size=20)), min_size=1, max_size=3))
def test_fuzzed_set_overrides_load_or_are_one_config_error(scratch: Path, overrides: list[tuple]) -> None:
    texts = []
    for path, value in overrides:
        try:
            literal = tomli_w.dumps({"v": value})[4:].strip() if not isinstance(value, str) else value
        except (TypeError, ValueError):
            literal = str(value)
        texts.append(f"{'.'.join(path)}={literal}")
    expect_config_or_error(scratch, None, tuple(texts))


@pytest.mark.parametrize("text", [
    "x = " + "[" * 5000 + "]" * 5000,
    "x = " + "{a=" * 3000 + "1" + "}" * 3000,
    "[run]\nseed = " + "9" * 5000,
    "[" + "a." * 2000 + "b]\n",
    "\ufeff[run]\nseed = 3\n",
    "",
])  # fmt: skip
def test_pathological_toml_is_one_config_error_or_a_config(scratch: Path, text: str) -> None:
    path = scratch / f"pathological_{next(_counter)}.toml"
    path.write_text(text, encoding="utf-8")
    expect_config_or_error(scratch, path)
