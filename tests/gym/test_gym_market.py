"""The env's market is the trainer's: same bars, same normalised features, the chosen fold's window."""

from __future__ import annotations

import numpy as np
import pytest

from foxhunt.config import load_config
from foxhunt.data import load
from foxhunt.env.tables import PortfolioObs
from foxhunt.gym import FoxhuntVectorEnv, prepare_market, resolve_config
from foxhunt.trainer.run_data import normalised_features, prepare_data


def test_first_observations_are_the_trainers_features_then_a_flat_portfolio(source, overrides):
    envs = FoxhuntVectorEnv(4, source, overrides=overrides, seed=3)
    config = load_config(None, [f"data.source={source}", *overrides])
    prepared = prepare_data(config)
    expected, _ = normalised_features(prepared.features, prepared.folds[0], config.features.clip)
    obs, infos = envs.reset(seed=3)
    n_features = envs.core.n_features
    assert obs.shape == (4, n_features + PortfolioObs.size())
    np.testing.assert_array_equal(obs[:, :n_features], expected[infos["bar"]])
    assert np.all(obs[:, n_features + PortfolioObs.POSITION] == 0.0)
    assert np.all(obs[:, n_features + PortfolioObs.EPISODE_RETURN] == 0.0)
    fold = prepared.folds[0]
    assert envs.market.window == (fold.train.start, fold.train.stop)
    assert np.all((infos["bar"] >= fold.train.start) & (infos["bar"] < fold.train.stop - 1))


@pytest.mark.parametrize("window", ["validation", "test"])
def test_held_out_windows_start_episodes_inside_them(source, overrides, window):
    envs = FoxhuntVectorEnv(8, source, overrides=overrides, window=window)
    start, end = envs.market.window
    bars = getattr(envs.market.fold, window)
    assert (start, end) == (bars.start, bars.stop)
    _, infos = envs.reset(seed=0)
    assert np.all((infos["bar"] >= start) & (infos["bar"] < end - 1))


def test_a_loaded_market_gives_the_same_features_as_its_source_string(source, overrides):
    by_name = prepare_market(resolve_config(None, source, overrides))
    by_data = prepare_market(resolve_config(None, None, overrides), load(source))
    np.testing.assert_array_equal(by_name.features, by_data.features)
    assert by_name.window == by_data.window


def test_bad_window_fold_and_overrides_are_named(source, overrides):
    config = resolve_config(None, source, overrides)
    with pytest.raises(ValueError, match="window must be one of train, validation, test"):
        prepare_market(config, window="live")
    with pytest.raises(ValueError, match=r"fold must be in 0\.\.0"):
        prepare_market(config, fold=1)
    with pytest.raises(TypeError, match="sequence of 'section.key=value' strings"):
        resolve_config(None, source, "folds.n_folds=1")
    with pytest.raises(ValueError, match="attrs.evolve"):
        resolve_config(config, None, ["folds.n_folds=2"])
