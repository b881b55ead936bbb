"""Configs whose values cannot work are refused before anything is built: one paragraph naming the key,
exit code 2, no traceback, no run folder. Single-key ranges come from the config classes' validators,
the rest from ``foxhunt/config_checks.py``."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest
import structlog
import torch
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import foxhunt.config_checks as checks
from foxhunt.cli.main import cli
from foxhunt.config import load_config
from foxhunt.config_checks import check_config, estimate_memory, observation_width, parameter_count
from foxhunt.errors import ConfigError
from foxhunt.data.instrument import preset
from foxhunt.env.config import physics_params
from foxhunt.learner.learner import priority_component
from foxhunt.learner.network import BranchingNetwork
from foxhunt.plugin.records import LossComponent

GIB = 1 << 30
MACHINE_RAM = 16 * GIB  # the tables below run as on a 16 GiB machine, whatever this one has

REFUSED = [  # (--set override, the key the paragraph must name, a phrase of the reason)
    ("learner.hidden=[0]", "learner.hidden", "each > 0"),
    ("learner.hidden=[]", "learner.hidden", "one or more layer widths"),
    ("learner.head_hidden=0", "learner.head_hidden", "must be > 0"),
    ("learner.adam_betas=[2,-1]", "learner.adam_betas", "each in [0, 1)"),
    ("learner.adam_betas=[0.9,1.0]", "learner.adam_betas", "each in [0, 1)"),
    ("learner.adam_eps=0", "learner.adam_eps", "must be > 0"),
    ("learner.adam_eps=1.5", "learner.adam_eps", "must be < 1.0"),
    ("learner.tau=1.5", "learner.tau", "must be <= 1.0"),
    ("learner.gamma=1.01", "learner.gamma", "must be <= 1.0"),
    ("learner.gamma=nan", "learner.gamma", "must be >= 0.0"),
    ("learner.max_grad_norm=inf", "learner.max_grad_norm", "must be finite"),
    ("learner.max_grad_norm=0", "learner.max_grad_norm", "must be > 0"),
    ('features.feature_set="cuda"', "features.feature_set", "unknown feature set 'cuda'"),
    ("run.seed=99999999999999999999", "run.seed", "must be <= 18446744073709551615"),
    ("run.seed=-1", "run.seed", "must be >= 0"),
    ("learner.lr=inf", "learner.lr", "must be finite"),
    ("learner.lr=nan", "learner.lr", "must be finite"),
    ("learner.lr=1e6", "learner.lr", "must be <= 1.0"),
    ("learner.lr=0", "learner.lr", "must be > 0"),
    ("learner.lr_min=inf", "learner.lr_min", "must be finite"),
    ("learner.v_min=10.0", "learner.v_min", "must be below learner.v_max = 10.0"),
    ("learner.v_max=inf", "learner.v_min", "must be finite"),
    ("learner.n_step=100000", "learner.n_step", "longer than an episode"),
    ("learner.n_step=1100", "learner.n_step", "= 1024"),  # also longer than an episode of 512 bars
    ("learner.replay.capacity=10", "learner.replay.capacity", "less than one step of env.n_envs = 64"),
    ("train.warmup_env_steps=51200", "train.warmup_env_steps", "no update would ever run"),
    ("train.updates_per_epoch=0", "train.updates_per_epoch", "never make an update, so it would never train"),
    ("run.threads=100000", "run.threads", "CPU core(s) this process may use"),
    ("env.n_envs=1e9", "env.n_envs", "more than the 16.0 GiB of RAM on this machine"),
    ("learner.n_atoms=1e6", "learner.n_atoms", "learner.n_atoms weighs most"),
    ("learner.ensemble_size=1e5", "learner.ensemble_size", "learner.ensemble_size weighs most"),
    ("learner.batch_size=1e8", "learner.batch_size", "learner.batch_size weighs most"),
    ("env.initial_cash=1e308", "env.initial_cash", "must be at most 1e+15"),
    ("env.initial_cash=inf", "env.initial_cash", "must be at most 1e+15"),
    ("env.reward_scale=inf", "env.reward_scale", "must be finite"),
]


@pytest.fixture(autouse=True)
def _sixteen_gib_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "memory_limit", lambda device: (MACHINE_RAM, "RAM on this machine"))


def train(tmp_path: Path, *overrides: str, data: str = "synthetic:planted?bars=800&seed=3"):
    args = ["train", "--data", data, "--out", str(tmp_path / "run"), "--device", "cpu", "--no-progress"]
    try:
        return CliRunner().invoke(cli, [*args, *(a for o in overrides for a in ("--set", o))], prog_name="foxhunt")
    finally:
        structlog.reset_defaults()


def assert_refused(result, tmp_path: Path, key: str, phrase: str) -> None:
    assert result.exit_code == 2, result.output
    paragraph = result.stderr.strip()
    assert paragraph.startswith("error: "), paragraph
    assert "\n\n" not in paragraph and "Traceback" not in result.output
    assert f"{key}: " in paragraph and phrase in paragraph, paragraph
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("override", "key", "phrase"), REFUSED, ids=[case[0] for case in REFUSED])
def test_foxhunt_train_refuses_the_value_naming_its_key(tmp_path: Path, override: str, key: str, phrase: str) -> None:
    assert_refused(train(tmp_path, override), tmp_path, key, phrase)


def test_every_problem_is_listed_in_the_one_paragraph(tmp_path: Path) -> None:
    result = train(tmp_path, "learner.v_min=20.0", "run.threads=100000", "train.warmup_env_steps=1e9",
                   'learner.lr_schedule="cosine"', "learner.lr=3e-4", "learner.lr_min=0.5")
    assert_refused(result, tmp_path, "learner.v_min", "this configuration cannot run:")
    for key in ("run.threads: ", "train.warmup_env_steps: ", "learner.lr_min: 0.5 is above learner.lr = 0.0003"):
        assert key in result.stderr


def test_a_warm_up_that_outlasts_the_fold_names_every_key_that_sets_it() -> None:
    # 51150 < 4 × 12800 env steps, but in vector steps of 100 environments it takes all 512 of them
    config = load_config(None, ["train.warmup_env_steps=51150", "env.n_envs=100", "learner.replay.capacity=100000"])
    [(key, reason)] = checks.value_problems(config)
    assert key == "train.warmup_env_steps"
    assert reason == (
        "51150 (rounded up to whole vector steps: 51200) is not below the 51200 env steps a fold collects "
        "(train.epochs × train.env_steps_per_epoch = 4 × 12800, in vector steps of env.n_envs = 100): the warm-up "
        "never ends, so no update would ever run and the run would never train; lower it to at most 51100, or raise "
        "train.epochs or train.env_steps_per_epoch"
    )
    assert checks.value_problems(attrs.evolve(config, train=attrs.evolve(config.train, warmup_env_steps=51100))) == []


def test_a_bad_plugin_table_is_refused_before_the_run_directory_exists(tmp_path: Path) -> None:
    result = train(tmp_path, "plugins.iqn.kappa=0", "plugins.c51.smoothing=0.2")
    assert_refused(result, tmp_path, "plugins.iqn.kappa", "'kappa' must be a finite number > 0: 0.0")
    assert "plugins.c51.smoothing: unknown key; the settings of plugin 'c51' are label_smoothing_max" in result.stderr


def test_a_combiner_no_plugin_provides_is_refused_before_the_run_directory_exists(tmp_path: Path) -> None:
    result = train(tmp_path, 'learner.combiner="pcgrd"')
    assert_refused(result, tmp_path, "learner.combiner", "'pcgrd' is not a gradient combiner of any loaded plugin")
    assert "(available: budgeted_sum, pcgrad, uncertainty)" in result.stderr
    disabled = train(tmp_path, 'learner.combiner="pcgrad"', 'plugins.disable=["pcgrad"]')
    assert_refused(disabled, tmp_path, "learner.combiner", "(available: budgeted_sum, uncertainty)")


def test_an_unknown_combiner_is_refused_like_every_other_value() -> None:
    """Regression (found by the config fuzzer): the combiner's refusal is check_config's one paragraph too."""
    with pytest.raises(ConfigError) as error:
        check_config(load_config(None, ['learner.combiner="00"']))
    assert str(error.value).startswith("this configuration cannot run:\n  learner.combiner: '00' is not a gradient")


def test_cuda_asked_for_without_a_gpu_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(cli, ["train", "--out", str(tmp_path / "run"), "--device", "cuda"], prog_name="foxhunt")
    structlog.reset_defaults()
    assert_refused(result, tmp_path, "run.device", "torch sees no CUDA GPU")


def test_a_priority_component_that_is_not_enabled_is_refused_with_the_known_ones(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path / "cache"))
    # the `horizons` inputs (warm-up 64): the profile's 512-bar warm-up would not leave these 800 bars the fold
    tiny = ("folds.n_folds=1", "folds.train_bars=300", "folds.validation_bars=80", "folds.test_bars=80",
            'features.feature_set="horizons"', "env.n_envs=8", "learner.hidden=[16]", "learner.n_atoms=11",
            "learner.replay.capacity=256")
    result = train(tmp_path, *tiny, 'learner.priority_component="nosuch"')
    assert_refused(result, tmp_path, "learner.priority_component", "'nosuch' is not an enabled loss component")
    assert "replay priorities can come from: c51, mse" in result.stderr


def test_priority_component_resolution_never_falls_back() -> None:
    td = LossComponent("td", 0.5, len, "with a TD error", per_sample=len)
    plain = LossComponent("plain", 0.5, len, "without one")
    assert priority_component([plain, td], "td") is td
    with pytest.raises(ConfigError, match=r"'plain' gives no per-sample TD error .* can come from: td$"):
        priority_component([plain, td], "plain")
    with pytest.raises(ConfigError, match=r"from: none: set learner.replay.prioritized = false"):
        priority_component([plain], "c51")


def test_the_defaults_and_the_gpu_profile_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    check_config(load_config(None, ["run.device=\"cpu\""]))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    gpu = load_config(None, ["run.device=\"cuda\""])
    assert gpu.env.n_envs == 4096
    assert estimate_memory(gpu).total < 4 * GIB  # far below an H200's 140 GiB
    check_config(gpu)


def test_cuda_compares_with_free_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real memory_limit
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (3 * GIB, 140 * GIB))
    assert checks.memory_limit("cuda") == (3 * GIB, "free GPU memory")
    config = load_config(None, ["run.device=\"cuda\"", "learner.batch_size=1e6"])
    with pytest.raises(ConfigError, match=r"learner.batch_size: the run needs about .* of free GPU memory"):
        check_config(config)
    limit = checks.memory_limit("cpu")
    assert limit is not None and limit[0] > GIB


def test_the_parameter_count_of_the_estimate_is_the_networks() -> None:
    config = load_config(None, ["learner.hidden=[17,9,5]", "learner.n_atoms=7", "learner.ensemble_size=3"])
    width = observation_width(config)
    network = BranchingNetwork(width, config.learner)
    assert parameter_count(config, width) == sum(p.numel() for p in network.parameters())


# -- any numeric override: a ConfigError or a config that keeps every promise --------------------------------
NUMERIC_KEYS = (
    "learner.lr", "learner.lr_min", "learner.adam_eps", "learner.tau", "learner.gamma", "learner.max_grad_norm",
    "learner.v_min", "learner.v_max", "learner.n_step", "learner.n_atoms", "learner.ensemble_size",
    "learner.batch_size", "learner.head_hidden", "learner.replay.capacity", "env.n_envs", "env.episode_bars",
    "run.seed", "run.threads", "train.warmup_env_steps", "train.epochs", "train.env_steps_per_epoch",
    "env.max_contracts", "env.churn_bars", "env.initial_cash", "env.reward_scale",
)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(0, 4096),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1.0, 1e6, 1e9, 1e303, 2**64, 2**64 - 1, 10**400]),
)


def _toml(value: float) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _float_fields(section: object) -> list[float]:
    return [getattr(section, f.name) for f in attrs.fields(type(section)) if f.type in (float, "float")]


@given(st.lists(st.tuples(st.sampled_from(NUMERIC_KEYS), NUMBERS), min_size=1, max_size=3))
def test_numeric_overrides_give_a_config_error_or_a_config_that_can_run(pairs: list[tuple[str, float]]) -> None:
    overrides = ["run.device=\"cpu\"", *(f"{key}={_toml(value)}" for key, value in pairs)]
    try:
        config = check_config(load_config(None, overrides))
    except ConfigError as error:
        assert "Traceback" not in str(error) and "\n\n" not in str(error)
        return
    c, env, train_ = config.learner, config.env, config.train
    assert all(math.isfinite(v) for v in _float_fields(c) + _float_fields(c.replay))
    assert 0 < c.lr <= 1 and c.v_min < c.v_max and all(0 <= b < 1 for b in c.adam_betas)
    assert 0 <= config.run.seed < 2**64 and config.run.threads <= checks.usable_cpus()
    assert c.n_step <= env.episode_bars and c.replay.capacity // env.n_envs >= c.n_step + 1
    plan = train_.plan(env.n_envs)
    assert plan.warmup_vector_steps < train_.epochs * plan.vector_steps
    assert estimate_memory(config).total <= MACHINE_RAM
    assert math.isfinite(physics_params(env, preset("ES"), (0, 2)).sum())  # what the environment is built from
    assert 0 < env.initial_cash <= checks.MAX_INITIAL_CASH
