"""Each adaptive plugin's ``[plugins.<name>]`` settings: defaults, validation, and how a user's table reaches it."""

from __future__ import annotations

import pytest
from adaptive_harness import MECHANISMS, build_run

from foxhunt.config import load_config
from foxhunt.errors import PluginError
from foxhunt_plugins.adaptive.epsilon import EpsilonSettings
from foxhunt_plugins.adaptive.gamma import GammaSettings
from foxhunt_plugins.adaptive.grad_balance import GradBalanceSettings
from foxhunt_plugins.adaptive.health import HealthSettings
from foxhunt_plugins.adaptive.support import SupportSettings
from foxhunt_plugins.adaptive.tau import TauSettings


def test_every_adaptive_plugin_declares_settings_with_defaults():
    run = build_run(diagnostics=False)
    assert sorted(run.host.all_settings()) == sorted(MECHANISMS)
    assert run.host.settings("tau") == TauSettings()


def test_a_toml_table_and_a_set_reach_their_plugin(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[plugins.gamma]\nminimum = [0.9, 0.9, 0.8, 0.8]\n\n[plugins.tau]\nend = 0.002\n")
    run = build_run(config=load_config(path, ["plugins.static.cql_alpha=0.3"]), diagnostics=False)
    assert run.host.settings("gamma").minimum == (0.9, 0.9, 0.8, 0.8)
    assert run.host.settings("tau").end == 0.002
    assert run.host.settings("static").cql_alpha == 0.3


def test_health_weights_are_normalised():
    weights = HealthSettings(w_gap=2.0, w_drift=0.0, w_grad=1.0, w_loss=1.0).normalised_weights()
    assert weights == pytest.approx((0.5, 0.0, 0.25, 0.25, 0.0))  # the collapse symptom is off by default
    weights = HealthSettings(w_gap=1.0, w_drift=1.0, w_grad=1.0, w_loss=0.0, w_collapse=1.0).normalised_weights()
    assert weights == pytest.approx((0.25, 0.25, 0.25, 0.0, 0.25))
    assert sum(HealthSettings().normalised_weights()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: HealthSettings(w_gap=0.0, w_drift=0.0, w_grad=0.0, w_loss=0.0), "at least one"),
        (lambda: HealthSettings(fast_rate=0.01, slow_rate=0.1), "slow_rate"),
        (lambda: HealthSettings(collapse_share=1.0), "collapse_share"),
        (lambda: TauSettings(start=0.001, end=0.01), "end"),
        (lambda: TauSettings(floor_min=0.5, floor_max=0.1), "floor_min"),
        (lambda: GammaSettings(minimum=(0.9, 0.9, 0.9)), "one value per branch"),
        (lambda: GammaSettings(minimum=(0.99,) * 4, maximum=(0.9,) * 4), "minimum"),
        (lambda: GammaSettings(maximum=(1.2,) * 4), r"\[0, 1\]"),
        (lambda: EpsilonSettings(start=(0.1,) * 4, end=(0.5,) * 4), "end"),
        (lambda: SupportSettings(min_half_width=5.0, max_half_width=1.0), "min_half_width"),
        (lambda: GradBalanceSettings(targets=(1.0, 0.0, 1.0, 1.0)), "> 0"),
        (lambda: GradBalanceSettings(limit=0.5), "limit"),
    ],
)
def test_invalid_settings_are_refused_with_the_reason(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_a_refused_table_names_the_plugin_and_the_section():
    config = load_config(None, ["plugins.tau.start=0.001", "plugins.tau.end=0.01"])
    with pytest.raises(PluginError) as caught:
        build_run(["tau"], config=config, diagnostics=False)
    (problem,) = caught.value.problems
    assert problem.plugin == "tau"
    assert problem.message == (
        "[plugins.tau]: end (0.01) must not exceed start (0.001) (fix [plugins.tau] in the config or its --set)"
    )
