"""The feature cache (hits, atomic writes, invalidation) and the training-window normaliser."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.data import load
from foxhunt.errors import DataError
from foxhunt.features import (
    FEATURE_SETS,
    FeatureCache,
    FeatureConfig,
    FeatureSet,
    Normalizer,
    compute_features,
    default_cache_dir,
)

MARKET = load("synthetic:planted?bars=500&seed=4")


def test_second_computation_is_a_cache_hit(tmp_path):
    cache = FeatureCache(tmp_path)
    first = compute_features(MARKET, "ohlcv", cache)
    assert (cache.hits, cache.misses, first.from_cache) == (0, 1, False)
    second = compute_features(MARKET, "ohlcv", cache)
    assert (cache.hits, cache.misses, second.from_cache) == (1, 1, True)
    np.testing.assert_array_equal(first.values, second.values)
    assert second.warmup == first.warmup and second.names == first.names
    assert [p.suffix for p in tmp_path.iterdir()] == [".npz"]  # no temporary file left behind


def test_version_data_and_names_all_key_the_cache(tmp_path):
    cache = FeatureCache(tmp_path)
    default = FEATURE_SETS["ohlcv"]
    compute_features(MARKET, default, cache)
    compute_features(MARKET, FeatureSet(default.name, "2", default.names), cache)  # new version
    compute_features(load("synthetic:planted?bars=500&seed=5"), default, cache)  # new data
    compute_features(MARKET, FeatureSet(default.name, default.version, default.names[:5]), cache)  # new names
    assert (cache.hits, cache.misses) == (0, 4)
    assert len(list(tmp_path.glob("*.npz"))) == 4


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    cache = FeatureCache(tmp_path)

    def broken_savez(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        compute_features(MARKET, "minimal", cache)
    assert list(tmp_path.iterdir()) == []


def test_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path):
    cache = FeatureCache(tmp_path)
    compute_features(MARKET, "minimal", cache)
    (entry,) = tmp_path.glob("*.npz")
    entry.write_bytes(b"not a zip file")
    again = compute_features(MARKET, "minimal", cache)
    assert not again.from_cache and cache.misses == 2
    assert compute_features(MARKET, "minimal", cache).from_cache


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "features"
    assert FeatureConfig().make_cache().directory == tmp_path / "features"
    monkeypatch.delenv("FOXHUNT_CACHE_DIR")
    assert default_cache_dir().parts[-3:] == (".cache", "foxhunt", "features")
    assert FeatureConfig(cache=False).make_cache() is None
    assert FeatureConfig(cache_dir=str(tmp_path)).make_cache().directory == tmp_path


def test_feature_config():
    assert FeatureConfig().resolve_set() is FEATURE_SETS["minimal"]
    custom = FeatureConfig(feature_set="mine", names=("ret_1", "rsi_7")).resolve_set()
    assert custom.names == ("ret_1", "rsi_7") and custom.name == "mine"
    with pytest.raises(ValueError, match="not built in"):
        FeatureConfig(feature_set="fancy")
    with pytest.raises(ValueError, match="unknown feature"):
        FeatureConfig(names=("nope_1",))
    with pytest.raises(ValueError, match="clip"):
        FeatureConfig(clip=0.0)


def test_normalizer_uses_only_the_training_rows():
    features = compute_features(MARKET, "ohlcv")
    train = range(features.warmup, 300)
    normalizer = Normalizer.fit(features, train)
    window = features.values[train.start : train.stop].astype(np.float64)
    flat = window.std(axis=0) == 0
    np.testing.assert_allclose(normalizer.mean, window.mean(axis=0))
    np.testing.assert_allclose(normalizer.std[~flat], window.std(axis=0)[~flat])
    assert (normalizer.std[flat] == 1.0).all()  # e.g. time-of-day on daily bars
    changed = features.values.copy()
    changed[300:] += 1000.0  # anything outside the training window must not matter
    again = Normalizer.fit(changed, train)
    np.testing.assert_array_equal(again.mean, normalizer.mean)
    np.testing.assert_array_equal(again.std, normalizer.std)
    out = normalizer.apply(features.values[train.start : train.stop])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[:, ~flat].mean(axis=0), 0, atol=1e-4)
    assert np.abs(normalizer.apply(changed[300:])).max() == normalizer.clip


def test_normalizer_rejects_warmup_rows():
    features = compute_features(MARKET, "ohlcv")
    with pytest.raises(DataError, match="warm-up"):
        Normalizer.fit(features, range(0, 200))
