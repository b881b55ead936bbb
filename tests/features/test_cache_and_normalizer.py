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
    assert FeatureConfig().resolve_set() is FEATURE_SETS["horizons"]
    custom = FeatureConfig(feature_set="mine", names=("ret_1", "rsi_7")).resolve_set()
    assert custom.names == ("ret_1", "rsi_7") and custom.name == "mine"
    # a set or a family the core does not know may be a feature plugin's: refused when the run's table has none
    with pytest.raises(DataError, match="unknown feature set 'fancy'"):
        FeatureConfig(feature_set="fancy").resolve_set()
    with pytest.raises(DataError, match="unknown feature 'nope_1'"):
        FeatureConfig(names=("nope_1",)).resolve_set()
    with pytest.raises(ValueError, match="not a set name"):
        FeatureConfig(feature_set="no such set")
    with pytest.raises(ValueError, match="positive integer parameter"):  # a core family's shape: refused at once
        FeatureConfig(names=("ret_1_2",))
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


def _entry_bytes(tmp_path, market) -> int:
    probe = FeatureCache(tmp_path / "probe")
    compute_features(market, "ohlcv", probe)
    (entry,) = (tmp_path / "probe").glob("*.npz")
    return entry.stat().st_size


def test_cache_stays_within_its_limit_and_evicts_the_least_recently_used(tmp_path):
    """Real entries on disk: A and B are written, A is read again, C is written: B goes, A and C stay."""
    markets = {name: load(f"synthetic:planted?bars=500&seed={seed}") for name, seed in (("a", 11), ("b", 12), ("c", 13))}
    size = _entry_bytes(tmp_path, markets["a"])
    cache = FeatureCache(tmp_path / "cache", max_bytes=int(2.5 * size))  # room for two entries
    paths = {}
    for name in ("a", "b"):
        compute_features(markets[name], "ohlcv", cache)
        paths[name] = max((tmp_path / "cache").glob("*.npz"), key=lambda p: p.stat().st_mtime_ns)
    assert compute_features(markets["a"], "ohlcv", cache).from_cache  # a use: A is now the most recent
    compute_features(markets["c"], "ohlcv", cache)
    assert paths["a"].exists() and not paths["b"].exists()
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 2 and cache.size() <= cache.max_bytes
    assert cache.evictions == 1
    again = FeatureCache(tmp_path / "cache", max_bytes=int(2.5 * size))
    assert not compute_features(markets["b"], "ohlcv", again).from_cache  # evicted: computed afresh
    assert compute_features(markets["c"], "ohlcv", again).from_cache


def test_lowering_the_limit_trims_the_cache_at_the_next_write(tmp_path):
    markets = [load(f"synthetic:planted?bars=500&seed={seed}") for seed in (21, 22, 23, 24)]
    size = _entry_bytes(tmp_path, markets[0])
    roomy = FeatureCache(tmp_path / "cache", max_bytes=10 * size)
    for market in markets[:3]:
        compute_features(market, "ohlcv", roomy)
    tight = FeatureCache(tmp_path / "cache", max_bytes=int(1.5 * size))
    compute_features(markets[3], "ohlcv", tight)
    (kept,) = (tmp_path / "cache").glob("*.npz")  # only the newest entry fits
    assert tight.evictions == 3 and compute_features(markets[3], "ohlcv", tight).from_cache


def test_an_entry_larger_than_the_whole_limit_is_not_kept_and_evicts_nothing(tmp_path):
    cache = FeatureCache(tmp_path, max_bytes=10 * (1 << 20))
    compute_features(MARKET, "minimal", cache)
    small = FeatureCache(tmp_path, max_bytes=_entry_bytes(tmp_path / "sizes", MARKET) // 2)
    other = load("synthetic:planted?bars=500&seed=31")
    features = compute_features(other, "ohlcv", small)
    assert features.values.shape[0] == len(other) and not features.from_cache
    assert len(list(tmp_path.glob("*.npz"))) == 1 and small.evictions == 0  # the earlier entry is untouched


def test_stale_temporary_files_of_killed_writers_are_removed(tmp_path):
    import os
    import time

    tmp_path.mkdir(exist_ok=True)
    stale, fresh = tmp_path / ".0123456789abcdef-dead.tmp", tmp_path / ".fedcba9876543210-live.tmp"
    stale.write_bytes(b"half an entry")
    fresh.write_bytes(b"an entry being written")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    compute_features(MARKET, "minimal", FeatureCache(tmp_path))
    assert not stale.exists() and fresh.exists()


def test_cache_limit_from_config_then_environment_then_two_gib(monkeypatch, tmp_path):
    from foxhunt.errors import ConfigError
    from foxhunt.features.cache import CACHE_LIMIT_ENV

    monkeypatch.delenv(CACHE_LIMIT_ENV, raising=False)
    assert FeatureCache(tmp_path).max_bytes == 2 * 1024**3
    monkeypatch.setenv(CACHE_LIMIT_ENV, "300")
    assert FeatureCache(tmp_path).max_bytes == 300 * 1024**2
    assert FeatureConfig(cache_dir=str(tmp_path), cache_max_mb=5).make_cache().max_bytes == 5 * 1024**2
    for bad in ("0", "-3", "2GB", "lots"):
        monkeypatch.setenv(CACHE_LIMIT_ENV, bad)
        with pytest.raises(ConfigError, match=f"{CACHE_LIMIT_ENV}.*{bad!r}.*whole number of MiB"):
            FeatureCache(tmp_path)
    with pytest.raises(ValueError, match="cache_max_mb must be > 0"):
        FeatureConfig(cache_max_mb=0)
