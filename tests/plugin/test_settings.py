"""``[plugins.<name>]``: a plugin's own settings, declared through the registrar and set by the user.

Every test goes through what a user writes (a TOML file or ``--set``) and what a
plugin author writes (``registrar.settings`` and a component hook taking
``settings``), and checks what either would see: the value the hook receives,
or the one-paragraph error naming the plugin, its distribution and version.
"""

from __future__ import annotations

import math
import types
from pathlib import Path

import attrs
import pytest

from foxhunt import Kernel, PluginHost, hookimpl
from foxhunt.config import dump_config, load_config
from foxhunt.errors import ConfigError, LifecycleError, PluginError
from foxhunt.plugin.settings import PluginSelection, migrate_saved


def _finite(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"'{attribute.name}' must be a finite number > 0: {value!r}")


@attrs.frozen
class DampSettings:
    """What a third-party plugin with one hyperparameter and a switch declares."""

    strength: float = attrs.field(default=0.5, validator=_finite)
    enabled: bool = False
    branches: tuple[str, ...] = ("direction",)


def damp_plugin(seen: list) -> types.ModuleType:
    module = types.ModuleType("foxhunt_damp")

    def declare(registrar) -> None:
        registrar.settings(DampSettings)

    def kernels(config, settings) -> list[Kernel]:
        seen.append(settings)
        return [Kernel("damp.noop", "epoch", lambda context: None, "does nothing")] if settings.enabled else []

    module.foxhunt_declare = hookimpl(declare)
    module.foxhunt_kernels = hookimpl(kernels)
    return module


def host_for(config, seen: list | None = None, **plugins: types.ModuleType) -> PluginHost:
    host = PluginHost(config.plugins)
    host.add_plugin(damp_plugin([] if seen is None else seen), "damp", distribution="foxhunt-damp", version="0.3.1")
    for name, module in plugins.items():
        host.add_plugin(module, name, distribution=f"{name}-dist", version="1.0")
    return host


def problems(config) -> list[str]:
    host = host_for(config).declare()
    with pytest.raises(PluginError) as caught:
        host.freeze()
    return [str(problem) for problem in caught.value.problems]


def test_the_hook_receives_the_values_set_in_toml_and_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("[plugins.damp]\nstrength = 2.0\nenabled = true\n")
    seen: list = []
    host = host_for(load_config(path, ["plugins.damp.branches=['direction', 'urgency']"]), seen).declare()
    host.freeze()
    assert [k.name for k in host.kernels(config=None)] == ["damp.noop"]
    assert seen == [DampSettings(strength=2.0, enabled=True, branches=("direction", "urgency"))]
    assert host.settings("damp") is seen[0]


def test_a_plugin_without_a_section_gets_its_defaults() -> None:
    seen: list = []
    host = host_for(load_config(), seen).declare()
    host.freeze()
    assert host.kernels(config=None) == []
    assert seen == [DampSettings()]
    assert host.all_settings() == {"damp": DampSettings()}


def test_the_registrar_returns_the_resolved_settings_while_declaring() -> None:
    returned = []
    module = types.ModuleType("foxhunt_eager")
    module.foxhunt_declare = hookimpl(lambda registrar: returned.append(registrar.settings(DampSettings)))
    host = PluginHost(load_config(None, ["plugins.eager.strength=3"]).plugins)
    host.add_plugin(module, "eager")
    host.declare().freeze()
    assert returned == [DampSettings(strength=3.0)]


def test_an_unknown_key_names_the_plugin_its_distribution_version_and_its_keys() -> None:
    (problem,) = problems(load_config(None, ["plugins.damp.strenght=2"]))
    assert problem == (
        "[damp from foxhunt-damp 0.3.1] plugins.damp.strenght: unknown key; the settings of plugin 'damp' are "
        "strength, enabled, branches (`foxhunt plugins inspect damp` shows them with their defaults)"
    )


def test_a_wrong_type_is_reported_with_its_key_path() -> None:
    assert problems(load_config(None, ['plugins.damp.enabled="yes"'])) == [
        "[damp from foxhunt-damp 0.3.1] plugins.damp.enabled: expected true or false, got str 'yes' "
        "(fix [plugins.damp] in the config or its --set)",
    ]


def test_a_value_the_settings_class_refuses_is_reported_with_its_key_path() -> None:
    assert problems(load_config(None, ["plugins.damp.strength=-1"])) == [
        "[damp from foxhunt-damp 0.3.1] plugins.damp.strength: 'strength' must be a finite number > 0: -1.0 "
        "(fix [plugins.damp] in the config or its --set)",
    ]


def test_a_section_for_a_plugin_that_is_not_installed_names_the_loaded_plugins() -> None:
    (problem,) = problems(load_config(None, ["plugins.dampp.strength=2"]))
    assert problem == (
        "[dampp from (not installed) -] [plugins.dampp] configures a plugin that is not loaded: no plugin named "
        "'dampp' is installed (loaded plugins: damp); did you mean 'damp'? correct the name or remove the section"
    )


def test_a_section_for_a_disabled_plugin_says_it_is_disabled(tmp_path: Path) -> None:
    config = load_config(None, ["plugins.disable=['damp']", "plugins.damp.strength=2"])
    host = PluginHost(config.plugins)
    host.add_core()
    host.plugins["damp"] = attrs.evolve(host.plugins["foxhunt"], name="damp", distribution="foxhunt-damp",
                                        version="0.3.1", status="disabled", hooks=[])
    host.declare()
    with pytest.raises(PluginError) as caught:
        host.freeze()
    assert [str(p) for p in caught.value.problems] == [
        "[damp from foxhunt-damp 0.3.1] [plugins.damp] configures a plugin that is not loaded: [plugins] disable "
        "names it (loaded plugins: foxhunt, foxhunt.learner); take it out of disable or remove the section"
    ]
    host = PluginHost(load_config(None, ["plugins.only=['foxhunt']", "plugins.damp.strength=2"]).plugins)
    host.add_core()
    host.plugins["damp"] = attrs.evolve(host.plugins["foxhunt"], name="damp", distribution="foxhunt-damp",
                                        version="0.3.1", status="disabled", hooks=[])
    with pytest.raises(PluginError, match=r"\[plugins\] only does not name it .*; add it to only or remove the section"):
        host.declare().freeze()


def test_a_section_for_a_plugin_that_declares_no_settings_is_refused() -> None:
    quiet = types.ModuleType("foxhunt_quiet")
    quiet.foxhunt_declare = hookimpl(lambda registrar: None)
    host = host_for(load_config(None, ["plugins.quiet.level=1"]), quiet=quiet).declare()
    with pytest.raises(PluginError) as caught:
        host.freeze()
    assert [str(p) for p in caught.value.problems] == [
        "[quiet from quiet-dist 1.0] [plugins.quiet] sets keys, but plugin 'quiet' declares no settings "
        "(it never calls registrar.settings); remove the section"
    ]


def test_settings_must_be_an_attrs_class_declared_once() -> None:
    twice = types.ModuleType("foxhunt_twice")

    def declare(registrar) -> None:
        registrar.settings(DampSettings)
        registrar.settings(DampSettings)
        registrar.settings(dict)

    twice.foxhunt_declare = hookimpl(declare)
    host = PluginHost()
    host.add_plugin(twice, "twice", distribution="twice-dist", version="2.0")
    with pytest.raises(PluginError) as caught:
        host.declare().freeze()
    assert [str(p) for p in caught.value.problems] == [
        "[twice from twice-dist 2.0] settings() was called twice; declare one class holding every setting of the plugin",
        "[twice from twice-dist 2.0] settings() takes an attrs class (decorate dict with @attrs.frozen), "
        "got <class 'dict'>",
    ]


def test_settings_cannot_be_declared_after_freeze() -> None:
    kept = []
    late = types.ModuleType("foxhunt_late")
    late.foxhunt_declare = hookimpl(lambda registrar: kept.append(registrar))
    host = PluginHost()
    host.add_plugin(late, "late")
    host.declare().freeze()
    with pytest.raises(LifecycleError, match="plugin 'late' tried to declare settings 'DampSettings' after"):
        kept[0].settings(DampSettings)


def test_plugin_sections_sit_beside_the_selection_keys_and_round_trip(tmp_path: Path) -> None:
    config = load_config(None, ["plugins.disable=['mse']", "plugins.damp.strength=2.5"])
    assert config.plugins.disable == ("mse",)
    assert config.plugins.settings == {"damp": {"strength": 2.5}}
    text = dump_config(config)
    assert "[plugins.damp]\nstrength = 2.5\n" in text
    path = tmp_path / "config.toml"
    path.write_text(text)
    assert load_config(path) == config


def test_a_value_directly_under_plugins_that_is_no_selection_key_is_an_unknown_key() -> None:
    with pytest.raises(ConfigError, match=r"plugins\.enabel: unknown key"):
        load_config(None, ["plugins.enabel=['c51']"])


def test_keys_the_core_used_to_own_are_refused_with_the_key_that_replaces_them(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text("[learner]\nkappa = 2.0\nlr = 1e-3\n\n[adaptive.health]\nw_gap = 2.0\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    lines = str(caught.value).splitlines()[1:]
    source = str(path)
    assert sorted(lines) == sorted([
        f"  {source}: learner.kappa: this key moved to plugins.iqn.kappa (the iqn loss plugin owns its quantile-Huber "
        "threshold); write `kappa = ...` under [plugins.iqn], or --set plugins.iqn.kappa=...",
        f"  {source}: adaptive.health.w_gap: this key moved to plugins.health.w_gap (each adaptive plugin owns its "
        "settings: [adaptive.NAME] is now [plugins.NAME]); write `w_gap = ...` under [plugins.health], "
        "or --set plugins.health.w_gap=...",
    ])


@pytest.mark.parametrize(("old", "new"), [
    ("learner.label_smoothing_max=0.2", "plugins.c51.label_smoothing_max"),
    ("learner.ensemble_diversity=0.2", "plugins.ensemble.diversity"),
    ("adaptive.static.cql_alpha=0.2", "plugins.static.cql_alpha"),
    ("learner.cql_alpha=0.2", "plugins.static.cql_alpha"),  # one key for the CQL strength, not two
    ("learner.replay.mirror=false", "plugins.mirror.enabled"),
    ("learner.replay.mirror_fraction=0.5", "plugins.mirror.fraction"),
])
def test_every_moved_key_names_its_new_key(old: str, new: str) -> None:
    with pytest.raises(ConfigError, match=rf"{old.split('=')[0]}: this key moved to {new} "):
        load_config(None, [old])


def test_enable_is_refused_with_only_and_the_opt_in_setting_named() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, ['plugins.enable=["huber"]'])
    assert str(caught.value) == (
        "invalid configuration:\n  --set plugins.enable=[\"huber\"]: plugins.enable: this key moved to plugins.only "
        "(`enable` always meant 'only these plugins'; every installed plugin is loaded unless disabled, and an opt-in "
        "plugin's components are switched on by its own setting, plugins.<name>.enabled = true); write `only = ...` "
        "under [plugins], or --set plugins.only=..."
    )
    # `enable = []`, what every run's config.toml held before `only`, narrowed nothing and still reads so
    assert load_config(None, ["plugins.enable=[]"]).plugins == PluginSelection()


def test_a_saved_enable_is_read_as_only() -> None:
    assert migrate_saved({"plugins": {"enable": ["a"], "disable": []}}) == {"plugins": {"only": ["a"], "disable": []}}


def test_a_config_foxhunt_saved_before_the_move_is_read_with_each_key_at_its_new_place() -> None:
    saved = {
        "plugins": {"enable": [], "disable": ["health"], "require": {}},
        "learner": {"lr": 0.001, "kappa": 2.0, "cql_alpha": 0.7, "ensemble_diversity": 0.25},
        "adaptive": {"static": {"cql_alpha": 0.3}, "health": {"w_gap": 2.0}, "tau": {"start": 0.02}},
    }
    migrated = migrate_saved(saved)
    assert migrated == {
        "plugins": {"disable": ["health"], "require": {}, "only": [],  # `enable` was always 'only these'
                    "iqn": {"kappa": 2.0}, "ensemble": {"diversity": 0.25},
                    "static": {"cql_alpha": 0.3},  # the [adaptive.static] value, the one that took effect
                    "tau": {"start": 0.02}},  # health is disabled in that run: its table is dropped
        "learner": {"lr": 0.001},
    }
    assert saved["learner"]["kappa"] == 2.0  # the record itself is left as it was
    assert migrate_saved(migrated) == migrated


def test_a_saved_replay_mirror_is_read_as_the_mirror_plugins_settings() -> None:
    saved = {"plugins": {"only": [], "disable": []},
             "learner": {"replay": {"capacity": 64, "mirror": False, "mirror_fraction": 0.5}}}
    assert migrate_saved(saved) == {
        "plugins": {"only": [], "disable": [], "mirror": {"enabled": False, "fraction": 0.5}},
        "learner": {"replay": {"capacity": 64}},
    }
