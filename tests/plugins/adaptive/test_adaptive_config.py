"""``[adaptive]`` config: defaults, validation, and how each plugin finds its section."""

from __future__ import annotations

import pytest

from foxhunt.adaptive_config import (
    AdaptiveConfig,
    EpsilonConfig,
    GammaConfig,
    GradBalanceConfig,
    HealthConfig,
    SupportConfig,
    TauConfig,
    adaptive_config_of,
)
from foxhunt.config_loading import structure


def test_sections_are_found_on_a_run_config_or_default():
    custom = AdaptiveConfig(tau=TauConfig(start=0.02))

    class Run:
        adaptive = custom

    assert adaptive_config_of(Run()) is custom
    assert adaptive_config_of(custom) is custom
    assert adaptive_config_of(None) == AdaptiveConfig()
    with pytest.raises(TypeError, match="AdaptiveConfig"):
        adaptive_config_of(type("Bad", (), {"adaptive": 3})())


def test_health_weights_are_normalised():
    weights = HealthConfig(w_gap=2.0, w_drift=0.0, w_grad=1.0, w_loss=1.0).normalised_weights()
    assert weights == pytest.approx((0.5, 0.0, 0.25, 0.25))
    assert sum(HealthConfig().normalised_weights()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: HealthConfig(w_gap=0.0, w_drift=0.0, w_grad=0.0, w_loss=0.0), "at least one"),
        (lambda: HealthConfig(fast_rate=0.01, slow_rate=0.1), "slow_rate"),
        (lambda: TauConfig(start=0.001, end=0.01), "end"),
        (lambda: TauConfig(floor_min=0.5, floor_max=0.1), "floor_min"),
        (lambda: GammaConfig(minimum=(0.9, 0.9, 0.9)), "one value per branch"),
        (lambda: GammaConfig(minimum=(0.99,) * 4, maximum=(0.9,) * 4), "minimum"),
        (lambda: GammaConfig(maximum=(1.2,) * 4), r"\[0, 1\]"),
        (lambda: EpsilonConfig(start=(0.1,) * 4, end=(0.5,) * 4), "end"),
        (lambda: SupportConfig(min_half_width=5.0, max_half_width=1.0), "min_half_width"),
        (lambda: GradBalanceConfig(targets=(1.0, 0.0, 1.0, 1.0)), "> 0"),
        (lambda: GradBalanceConfig(limit=0.5), "limit"),
    ],
)
def test_invalid_settings_are_refused_with_the_reason(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_loads_from_toml_shaped_data():
    data = {"gamma": {"minimum": [0.9, 0.9, 0.8, 0.8]}, "kelly": {"warmup_trades": 10}}
    config = structure(data, AdaptiveConfig, source="test")
    assert config.gamma.minimum == (0.9, 0.9, 0.8, 0.8)
    assert config.kelly.warmup_trades == 10.0
