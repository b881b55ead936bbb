"""Run-size profiles fill only what the user left out, and follow the run's device."""

from __future__ import annotations

import pytest
import torch

from foxhunt.config import load_config
from foxhunt.errors import ConfigError
from foxhunt.profiles import PROFILES, apply_profile, resolve_profile


def test_a_cuda_run_gets_the_gpu_sizes() -> None:
    config = load_config(None, ['run.device="cuda"'])
    assert config.run.profile == "gpu"
    assert config.env.n_envs == PROFILES["gpu"]["env.n_envs"]
    assert config.learner.batch_size == PROFILES["gpu"]["learner.batch_size"]
    assert config.learner.replay.capacity == PROFILES["gpu"]["learner.replay.capacity"]
    assert config.learner.compile is True


def test_a_cpu_run_gets_the_studys_values_and_the_class_sizes() -> None:
    config = load_config(None, ['run.device="cpu"'])
    assert config.run.profile == "cpu"
    assert (config.env.n_envs, config.learner.compile) == (64, False)
    assert config.learner.batch_size == PROFILES["cpu"]["learner.batch_size"] == 256
    assert config.learner.lr == PROFILES["cpu"]["learner.lr"]
    # the 512-bar level and the execution credit: docs/learner.md, "Both profiles take the 512-bar level"
    assert config.features.feature_set == "horizons512"
    assert (config.learner.execution_regret, config.learner.shaping_only) == (True, True)
    # plugin values are defaults beneath the plugin's own section, never a section of their own
    assert config.plugins.settings == {}
    assert config.plugins.profile_settings["mirror"] == {"fraction": PROFILES["cpu"]["plugins.mirror.fraction"]}


def test_what_the_user_writes_in_a_plugin_section_wins_over_the_profile() -> None:
    config = load_config(None, ['run.device="cpu"', "plugins.mirror.fraction=0.1"])
    assert config.plugins.settings["mirror"] == {"fraction": 0.1}
    assert apply_profile({"run": {"device": "cpu"}}).get("plugins") is None  # no section is written


def test_the_gpu_profile_keeps_the_class_learning_rate_and_takes_the_credit_and_the_level() -> None:
    gpu, cpu = load_config(None, ['run.device="cuda"']), load_config(None, ['run.device="cpu"'])
    assert gpu.learner.lr != cpu.learner.lr
    # the credit measured on the H200 (docs/learner.md, "The GPU profile and the execution credit"), the level on
    # an H100 ("Both profiles take the 512-bar level")
    assert gpu.features.feature_set == "horizons512"
    assert (gpu.learner.execution_regret, gpu.learner.shaping_only) == (True, True)


def test_what_the_user_sets_wins_over_the_profile(tmp_path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('[run]\ndevice = "cuda"\n[env]\nn_envs = 512\n')
    config = load_config(path, ["learner.compile=false"])
    assert config.env.n_envs == 512
    assert config.learner.compile is False
    assert config.learner.batch_size == PROFILES["gpu"]["learner.batch_size"]


def test_an_explicit_profile_overrides_the_device() -> None:
    assert load_config(None, ['run.device="cpu"', 'run.profile="gpu"']).env.n_envs == 4096
    assert load_config(None, ['run.device="cuda"', 'run.profile="cpu"']).env.n_envs == 64


def test_auto_follows_the_machine() -> None:
    assert resolve_profile({}) == ("gpu" if torch.cuda.is_available() else "cpu")


def test_a_resolved_config_reloads_unchanged() -> None:
    data = apply_profile({"run": {"device": "cuda"}})
    assert apply_profile(data) == data
    assert data["run"]["profile"] == "gpu"


def test_an_unknown_profile_names_the_key() -> None:
    with pytest.raises(ConfigError, match="run.profile"):
        load_config(None, ['run.profile="huge"'])


@pytest.mark.parametrize("value", ["[]", "{a=1}", "[\"gpu\"]"])
def test_a_profile_that_is_not_a_name_is_a_config_error_naming_the_key(value: str) -> None:
    """Found by fuzzing --set: a list or table as run.profile was an unhashable-type traceback in apply_profile."""
    with pytest.raises(ConfigError, match=r"run\.profile: expected a string"):
        load_config(None, (f"run.profile={value}",))
