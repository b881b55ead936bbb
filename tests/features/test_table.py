"""A run's feature table: plugin families and sets join the core's through the host, clashes are refused naming
both sides, and a plugin family's owner and version are part of the cache key."""

from __future__ import annotations

import types

import attrs
import numpy as np
import pytest

from foxhunt import hookimpl
from foxhunt.data import load
from foxhunt.errors import DataError, PluginError
from foxhunt.features import (
    CORE_TABLE,
    FEATURE_SETS,
    FEATURES,
    FeatureCache,
    FeatureConfig,
    FeatureDef,
    FeatureSet,
    FeatureTable,
    compute_features,
)
from foxhunt.config import FoxhuntConfig
from foxhunt.plugin.host import config_feature_table
from foxhunt.testing import make_host
from foxhunt.trainer.run_data import prepare_data

MARKET = load("synthetic:planted?bars=300&seed=4")


def _doubled_return(market, k):
    log_close = np.log(market.close)
    out = np.full(len(market), np.nan)
    out[k:] = 2.0 * (log_close[k:] - log_close[:-k])
    return out, k


TWICE = FeatureDef("twice", 1, "ohlcv", _doubled_return, "2 ln(c_t / c_(t-k))")


def plugin(name: str, families=(), sets=()) -> types.ModuleType:
    module = types.ModuleType(name)
    module.foxhunt_features = hookimpl(lambda config: list(families))
    module.foxhunt_feature_sets = hookimpl(lambda config: list(sets))
    return module


def table_of(*plugins: tuple[types.ModuleType, str]) -> FeatureTable:
    host = make_host(*plugins)
    host.declare()
    host.freeze()
    return host.feature_table(None)


def messages(error: PluginError) -> list[tuple[str, str]]:
    return [(problem.plugin, problem.message) for problem in error.problems]


def test_a_plugin_family_and_set_join_the_core_table() -> None:
    table = table_of((plugin("doubler", [TWICE], [FeatureSet("doubled", "1", ("ret_1", "twice_3"))]), "doubler"))
    assert table.owner("twice_3") == "doubler" and table.set_owners["doubled"] == "doubler"
    assert set(FEATURES) < set(table.families) and set(FEATURE_SETS) < set(table.sets)
    matrix = compute_features(MARKET, "doubled", table=table)
    np.testing.assert_allclose(matrix.column("twice_3")[3:], 2.0 * np.log(MARKET.close[3:] / MARKET.close[:-3]),
                               rtol=1e-6)
    assert FeatureConfig(feature_set="doubled").resolve_set(table).names == ("ret_1", "twice_3")
    with pytest.raises(DataError, match="unknown feature 'twice_3'"):  # without the plugin: not a feature
        compute_features(MARKET, FeatureSet("custom", "1", ("twice_3",)))
    with pytest.raises(DataError, match="unknown feature set 'doubled'"):
        FeatureConfig(feature_set="doubled").resolve_set()


def test_a_family_of_two_plugins_is_refused_naming_both() -> None:
    with pytest.raises(PluginError) as refused:
        table_of((plugin("first", [TWICE]), "first"), (plugin("second", [TWICE]), "second"))
    [(who, message)] = messages(refused.value)
    assert who == "second" and "'twice'" in message and "'first'" in message


def test_a_core_name_is_refused() -> None:
    clash = attrs.evolve(TWICE, base="ret")
    with pytest.raises(PluginError) as refused:
        table_of((plugin("shadow", [clash], [FeatureSet("ohlcv", "9", ("ret_1",))]), "shadow"))
    assert messages(refused.value) == [
        ("shadow", "feature family 'ret' is the core's own (foxhunt/features); rename it"),
        ("shadow", "feature set 'ohlcv' is the core's own (foxhunt/features); rename it"),
    ]


def test_compose_tells_each_plugin_of_a_clash_and_checks_set_names() -> None:
    _, found = FeatureTable.compose([("a", TWICE), ("b", TWICE)], [("c", FeatureSet("lost", "1", ("nothing_2",)))])
    assert [plugin for plugin, _ in found] == ["b", "a", "c"]
    assert "also provided by plugin 'b'" in found[1][1] and "unknown feature 'nothing_2'" in found[2][1]


def test_a_family_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(PluginError, match="returned str, expected FeatureDef"):
        table_of((plugin("odd", ["twice"]), "odd"))


def test_the_plugin_version_is_part_of_the_cache_key(tmp_path) -> None:
    fs = FeatureSet("doubled", "1", ("ret_1", "twice_2"))
    first, _ = FeatureTable.compose([("doubler", TWICE)])
    upgraded, _ = FeatureTable.compose([("doubler", attrs.evolve(TWICE, version="2"))])
    renamed, _ = FeatureTable.compose([("other", TWICE)])
    assert first.key_parts(fs.names) == ("twice=doubler@1",)
    assert CORE_TABLE.key_parts(("ret_1", "rsi_7")) == ()  # the core's own keys do not change
    cache = FeatureCache(tmp_path)
    assert not compute_features(MARKET, fs, cache, first).from_cache
    assert compute_features(MARKET, fs, cache, first).from_cache
    assert not compute_features(MARKET, fs, cache, upgraded).from_cache  # a new version: computed afresh
    assert not compute_features(MARKET, fs, cache, renamed).from_cache  # another plugin's family of that name
    assert len(list(tmp_path.glob("*.npz"))) == 3


def test_the_matrix_carries_each_columns_parity() -> None:
    even = attrs.evolve(TWICE, base="flat", mirror="even")
    table, _ = FeatureTable.compose([("doubler", TWICE), ("doubler", even)])
    matrix = compute_features(MARKET, FeatureSet("mixed", "1", ("twice_2", "flat_2", "rvol_4")), table=table)
    assert matrix.parity == (-1.0, 1.0, 1.0)


def test_the_matrix_carries_each_columns_group_named_or_implied_by_its_needs() -> None:
    intensity = attrs.evolve(TWICE, base="blocks", group="multi_timeframe")
    table, _ = FeatureTable.compose([("doubler", TWICE), ("doubler", intensity)])
    matrix = compute_features(MARKET, FeatureSet("mixed", "1", ("twice_2", "blocks_2", "rvol_4")), table=table)
    assert TWICE.group == "market"  # an "ohlcv" family that names no group
    assert matrix.groups == ("market", "multi_timeframe", "market")
    assert CORE_TABLE.groups(("ofi_4", "trade_imbalance_4", "spread_bps", "ret_1")) == (
        "order_flow", "order_flow", "book", "market")  # ofi reads the book but measures order flow
    implied = {"ohlcv": "market", "book": "book", "levels": "book", "flow": "order_flow", "book+flow": "order_flow"}
    for needs, group in implied.items():
        assert FeatureDef("probe", 1, needs, TWICE.compute, "probe").group == group
    for not_a_family_group in ("sentiment", "portfolio", "isv_context"):  # the last two: columns the core adds
        with pytest.raises(ValueError, match="group"):
            attrs.evolve(TWICE, group=not_a_family_group)


def test_feature_config_checks_core_shapes_only() -> None:
    assert FeatureConfig(names=("twice_3", "ret_2")).names == ("twice_3", "ret_2")  # maybe a plugin's: checked later
    with pytest.raises(ValueError, match="ret takes 1 positive integer"):
        FeatureConfig(names=("ret_2_3",))


def test_a_run_without_a_host_asks_the_plugins_only_for_a_name_the_core_lacks() -> None:
    config = FoxhuntConfig()
    assert config_feature_table(config) is CORE_TABLE  # the default set: no plugin is loaded for it
    elsewhere = attrs.evolve(config, features=FeatureConfig(feature_set="nowhere_to_be_found"))
    with pytest.raises(DataError, match="unknown feature set 'nowhere_to_be_found'"):
        config_feature_table(elsewhere).resolve("nowhere_to_be_found")


def test_prepare_data_computes_with_the_given_table() -> None:
    table, _ = FeatureTable.compose([("doubler", TWICE)], [("doubler", FeatureSet("doubled", "1", ("twice_2",)))])
    config = attrs.evolve(FoxhuntConfig(), features=FeatureConfig(feature_set="doubled", cache=False))
    prepared = prepare_data(config, load("synthetic:planted?bars=4100&seed=4"), table)
    assert prepared.features.names == ("twice_2",) and prepared.features.warmup == 2
