"""Purged, embargoed walk-forward folds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.data import load
from foxhunt.errors import DataError
from foxhunt.features import Normalizer, compute_features
from foxhunt.folds import FoldConfig, bars_needed, describe_folds, make_folds

configs = st.builds(
    FoldConfig,
    n_folds=st.integers(1, 6),
    train_bars=st.integers(2, 300),
    validation_bars=st.integers(2, 100),
    test_bars=st.integers(2, 100),
    embargo_bars=st.integers(0, 50),
    mode=st.sampled_from(["anchored", "rolling"]),
)


@given(config=configs, warmup=st.integers(0, 80), extra=st.integers(0, 500))
def test_fold_windows_are_ordered_purged_and_end_at_the_last_bar(config, warmup, extra):
    n_bars = bars_needed(config, warmup) + extra
    folds = make_folds(n_bars, config, warmup)
    assert len(folds) == config.n_folds
    assert folds[-1].test.stop == n_bars  # the most recent bars are tested on
    for k, fold in enumerate(folds):
        assert fold.index == k
        assert fold.train.start >= warmup
        assert len(fold.validation) == config.validation_bars and len(fold.test) == config.test_bars
        assert len(fold.embargo) == config.embargo_bars and len(fold.test_embargo) == config.embargo_bars
        # in time order, each window starting where the one before it stops
        windows = (fold.train, fold.embargo, fold.validation, fold.test_embargo, fold.test)
        for before, after in zip(windows, windows[1:]):
            assert before.stop == after.start
        if config.mode == "rolling":
            assert len(fold.train) == config.train_bars
        else:
            assert fold.train.start == warmup and len(fold.train) >= config.train_bars
        for earlier in folds[: k + 1]:  # its own and every earlier fold: nothing selected or reported was trained on
            assert set(fold.validation).isdisjoint(earlier.train)
            assert set(fold.test).isdisjoint(earlier.train)
            assert set(fold.test).isdisjoint(earlier.validation)  # no test bar ever chose a model
        # embargoes respected: every training bar sits at least embargo_bars before validation, and validation before test
        assert fold.validation.start - (fold.train.stop - 1) > config.embargo_bars
        assert fold.test.start - (fold.validation.stop - 1) > config.embargo_bars
        if k:
            assert fold.test.start == folds[k - 1].test.stop  # walk forward, no gap, no overlap


def test_too_short_data_says_how_many_bars_are_needed():
    config = FoldConfig(n_folds=3, train_bars=1000, validation_bars=200, test_bars=100, embargo_bars=10)
    message = (
        r"has 1500 bars but 3 fold\(s\) need at least 1584: warm-up 64 \+ train 1000 \+ embargo 10 \+ "
        r"validation 200 \+ embargo 10 \+ 3 x test 100"
    )
    with pytest.raises(DataError, match=message):
        make_folds(1500, config, warmup=64)
    assert len(make_folds(1584, config, warmup=64)) == 3
    with pytest.raises(DataError, match="need at least 1584"):
        make_folds(1583, config, warmup=64)


# the classes' set, a 256-bar one, the profiles'
@pytest.mark.parametrize("feature_set", ["horizons", "horizons256", "horizons512"])
@pytest.mark.parametrize("name", ["eurusd-1h-2017", "sp500-1d-1999-2018"])
def test_the_default_layout_fits_both_bundled_datasets(name, feature_set):
    market = load(name)
    warmup = compute_features(market, feature_set).warmup
    assert len(market) >= bars_needed(FoldConfig(), warmup)
    assert make_folds(len(market), FoldConfig(), warmup)[-1].test.stop == len(market)


def test_a_run_on_too_short_data_names_the_feature_set_whose_warm_up_it_needs(tmp_path, monkeypatch):
    from foxhunt.config import load_config
    from foxhunt.trainer.run_data import prepare_data

    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path))
    layout = ["folds.n_folds=2", "folds.train_bars=300", "folds.validation_bars=80", "folds.test_bars=80",
              "folds.embargo_bars=5", 'data.source="synthetic:planted?bars=800&seed=3"', 'run.device="cpu"']
    with pytest.raises(DataError) as refused:
        prepare_data(load_config(None, layout))  # the CPU profile's horizons512: 511 bars of warm-up
    message = str(refused.value)
    assert message.startswith("synthetic:planted?bars=800") and "need at least 1061: warm-up 511" in message
    offered = message.split("built-in sets that fit: ")[1]
    assert "feature set 'horizons512'" in message and "'horizons512'" not in offered and "'horizons256'" not in offered
    # 550 bars of folds: every set with a warm-up of at most 250 fits; `book` needs a book this market has not
    for name, warmup in (("ohlcv", 64), ("minimal", 16), ("horizons", 63)):
        assert f"'{name}' (warm-up {warmup})" in offered
        assert len(prepare_data(load_config(None, [*layout, f'features.feature_set="{name}"'])).folds) == 2
    assert "'book'" not in offered


def test_a_layout_no_built_in_set_fits_says_so(tmp_path, monkeypatch):
    from foxhunt.config import load_config
    from foxhunt.trainer.run_data import prepare_data

    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path))
    layout = ["folds.n_folds=2", "folds.train_bars=700", "folds.validation_bars=80", "folds.test_bars=80",
              "folds.embargo_bars=5", 'data.source="synthetic:planted?bars=800&seed=3"', 'run.device="cpu"']
    with pytest.raises(DataError, match="no built-in set leaves room for these folds"):
        prepare_data(load_config(None, layout))  # 950 bars of folds before any warm-up


def test_config_validators():
    with pytest.raises(ValueError, match="n_folds must be an integer >= 1"):
        FoldConfig(n_folds=0)
    with pytest.raises(ValueError, match="embargo_bars"):
        FoldConfig(embargo_bars=-1)
    with pytest.raises(ValueError, match="test_bars must be an integer >= 2"):
        FoldConfig(test_bars=1)
    with pytest.raises(ValueError):
        FoldConfig(mode="expanding")


def test_normalisation_fitted_on_each_fold_training_window_only():
    market = load("sp500-1d-1999-2018")
    features = compute_features(market)
    layout = FoldConfig(n_folds=3, train_bars=1500, validation_bars=400, test_bars=400)
    folds = make_folds(len(market), layout, features.warmup)
    for fold in folds:
        normalizer = Normalizer.fit(features, fold.train)
        train_values = features.values[fold.train_slice].astype(np.float64)
        np.testing.assert_allclose(normalizer.mean, train_values.mean(axis=0))
        poisoned = features.values.copy()
        poisoned[fold.embargo.start :] = 1e6  # embargo, validation, test (and later) bars
        assert np.array_equal(Normalizer.fit(poisoned, fold.train).mean, normalizer.mean)


def test_describe_folds_rows():
    market = load("eurusd-1h-2017")
    rolling_folds = make_folds(len(market), FoldConfig(mode="rolling"), warmup=64)
    rolling = describe_folds(rolling_folds, market.timestamps)
    assert [row.train_bars for row in rolling] == [2000, 2000, 2000]
    folds = make_folds(len(market), FoldConfig(), warmup=64)
    rows = describe_folds(folds, market.timestamps)
    assert [r.fold for r in rows] == [0, 1, 2]
    assert rows[-1].test_end == "2017-12-29 21:00"
    # anchored by default: every fold trains from the warm-up to where the rolling layout's training ends, so 500
    # bars more each fold, and its validation and test windows are the rolling layout's
    assert [row.train_bars for row in rows] == [4113, 4613, 5113]
    assert [(fold.train.start, fold.train.stop) for fold in folds] == [(64, r.train.stop) for r in rolling_folds]
    assert [(row.validation_start, row.test_start, row.test_end) for row in rows] == [
        (row.validation_start, row.test_start, row.test_end) for row in rolling]
    assert rows[0].embargo_bars == 24
    assert rows[0].validation_bars == 500 and rows[0].test_bars == 500
    for row in rows:
        assert row.validation_end < row.test_start <= row.test_end
    daily = load("sp500-1d-1999-2018")
    (row,) = describe_folds(make_folds(len(daily), FoldConfig(n_folds=1), 64), daily.timestamps)
    assert row.test_end == "2018-12-31"


def test_only_names_one_of_the_folds_and_selects_it() -> None:
    from foxhunt.config import load_config
    from foxhunt.errors import ConfigError

    assert list(FoldConfig(n_folds=3).selected()) == [0, 1, 2]
    assert list(FoldConfig(n_folds=3, only=2).selected()) == [2]
    with pytest.raises(ConfigError, match=r"folds.only: 'only' must name one of the 3 folds \(0 to 2\), got 3"):
        load_config(None, ["folds.n_folds=3", "folds.only=3"])
    with pytest.raises(ConfigError, match=r"folds: folds.only must be an integer >= 0, got -1"):
        load_config(None, ["folds.only=-1"])
