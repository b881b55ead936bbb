"""The plugin host: discovery through the entry-point group, validation, one report of every problem, lifecycle.

Each problem the foundation issue names has its own test with its message; one
test stacks them all in a single run and checks they are reported together.
Plugins that must be *imported* (import errors, version requirements, the
third-party package) are real distributions written to a temporary
``sys.path`` entry (see ``tests/fixtures/fake_dists.py``).
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest
import torch

from foxhunt import AdaptiveMonitor, Encoder, GradientCombiner, Kernel, LossComponent, PluginHost, PluginSelection, hookimpl
from foxhunt.errors import LifecycleError, PluginError, PluginProblem
from foxhunt.isv import FINGERPRINT_SLOT
from foxhunt.monitoring.monitors import reset_monitor
from foxhunt.plugin.host import ENTRY_POINT_GROUP, Phase

_spec = importlib.util.spec_from_file_location("foxhunt_test_fake_dists", Path(__file__).parents[1] / "fixtures" / "fake_dists.py")
fake_dists = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_dists)


def plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, function in hooks.items():
        setattr(module, hook_name, hookimpl(function))
    return module


def slot_plugin(*names: str, entry: bool = True) -> types.ModuleType:
    def declare(registrar) -> None:
        for name in names:
            registrar.slot(name)
            if entry:
                registrar.state(name, "fold-reset")

    return plugin("slot_plugin", foxhunt_declare=declare)


def loss(name: str, budget: float = 0.5) -> LossComponent:
    return LossComponent(name, budget, lambda batch: torch.zeros(()), f"test loss {name}")


def host_with(*plugins: tuple[str, types.ModuleType]) -> PluginHost:
    host = PluginHost()
    for name, module in plugins:
        host.add_plugin(module, name, distribution=f"{name}-dist", version="1.0")
    return host


def problems_of(host: PluginHost) -> list[str]:
    with pytest.raises(PluginError) as caught:
        host.declare().freeze()
    return [str(problem) for problem in caught.value.problems]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A temporary site directory on sys.path; distributions written there are discovered."""
    fake_dists.make_visible(monkeypatch, tmp_path)
    yield tmp_path
    fake_dists.forget_modules(tmp_path)


def only(*names: str, **selection) -> PluginHost:
    """A host limited to the named plugins (whatever else is installed stays disabled and unimported)."""
    return PluginHost(PluginSelection(only=names, **selection))


# -- each problem, its message ---------------------------------------------------
def test_misspelled_hook_is_reported_with_a_suggestion() -> None:
    host = host_with(("typo", plugin("typo_plugin", foxhunt_delcare=lambda registrar: None)))
    assert host.plugins["typo"].status == "failed"
    assert host.plugins["typo"].error == "unknown hook(s): foxhunt_delcare"
    (problem,) = problems_of(host)
    assert problem == (
        "[typo from typo-dist 1.0] unknown hook 'foxhunt_delcare': no such hookspec (did you mean 'foxhunt_declare'?)"
    )


def test_a_hook_without_its_marker_is_refused_not_skipped() -> None:
    # The right name without @hookimpl: pluggy registers nothing for it, and the plugin would show "loaded".
    unmarked = types.ModuleType("unmarked_plugin")
    unmarked.foxhunt_declare = lambda registrar: registrar.slot("unmarked.value")
    host = host_with(("unmarked", unmarked))
    assert host.plugins["unmarked"].status == "failed"
    assert host.plugins["unmarked"].error == "hook(s) without @hookimpl: foxhunt_declare"
    (problem,) = problems_of(host)
    assert problem == (
        "[unmarked from unmarked-dist 1.0] 'foxhunt_declare' is not marked as a hook implementation, so pluggy would "
        "skip it silently; decorate it with @foxhunt.hookimpl"
    )


def test_a_marked_hook_whose_prefix_is_misspelled_is_an_unknown_hook() -> None:
    host = host_with(("prefix", plugin("prefix_plugin", foxhnut_declare=lambda registrar: None)))
    assert host.plugins["prefix"].status == "failed"
    (problem,) = problems_of(host)
    assert problem == (
        "[prefix from prefix-dist 1.0] unknown hook 'foxhnut_declare': no such hookspec (did you mean 'foxhunt_declare'?)"
    )


def test_hook_name_far_from_any_spec_lists_the_known_hooks() -> None:
    host = host_with(("odd", plugin("odd_plugin", foxhunt_qqqqqqqqqqqqqqqqqqqqqq=lambda: None)))
    (problem,) = problems_of(host)
    assert "unknown hook 'foxhunt_qqqqqqqqqqqqqqqqqqqqqq'" in problem
    assert ("known hooks: foxhunt_declare, foxhunt_encoders, foxhunt_feature_sets, foxhunt_features, "
            "foxhunt_gradient_combiners, foxhunt_kernels, foxhunt_loss_components, foxhunt_monitors") in problem


def test_hook_with_a_wrong_signature_is_reported() -> None:
    host = host_with(("sig", plugin("sig_plugin", foxhunt_declare=lambda reg, extra: None)))
    (problem,) = problems_of(host)
    assert problem.startswith("[sig from sig-dist 1.0] hook signature rejected:")
    assert "foxhunt_declare" in problem


def test_import_error_is_reported_with_distribution_and_version(site: Path) -> None:
    fake_dists.write_distribution(site, "broken-dist", "0.4.1", {"broken": ("broken_plugin", fake_dists.IMPORT_ERROR_PLUGIN)})
    host = only("broken").discover()
    assert host.plugins["broken"].status == "failed"
    (problem,) = problems_of(host)
    assert problem == (
        "[broken from broken-dist 0.4.1] import of 'broken_plugin' failed: RuntimeError: "
        "boom: this plugin cannot be imported (fix the import or disable the plugin)"
    )


def test_duplicate_slot_across_two_plugins_names_both() -> None:
    host = host_with(("first", slot_plugin("shared.value")), ("second", slot_plugin("shared.value")))
    problems = problems_of(host)
    assert "[second from second-dist 1.0] ISV slot 'shared.value' is already declared by plugin 'first' (from first-dist 1.0); choose another name" in problems
    # the plugin that happened to declare first is told too: either may be the one to rename
    assert ("[first from first-dist 1.0] ISV slot 'shared.value' is also declared by plugin 'second' (from second-dist "
            "1.0); rename it in one of the two, or disable one of them in [plugins]") in problems
    assert {name: host.plugins[name].status for name in ("first", "second")} == {"first": "failed", "second": "failed"}
    assert "also declared by plugin 'second'" in host.plugins["first"].error


def test_a_slot_clashing_with_the_cores_blames_the_plugin_only() -> None:
    host = PluginHost()
    host.add_core()
    host.add_plugin(slot_plugin("train.progress"), "late", distribution="late-dist", version="1.0")
    problems = problems_of(host)
    assert any(p.startswith("[late from late-dist 1.0] ISV slot 'train.progress' is already declared by plugin 'foxhunt'")
               for p in problems)
    assert not any(p.startswith("[foxhunt ") for p in problems)  # the core's names are fixed
    assert host.plugins["foxhunt"].status == "loaded"


def test_slot_without_reset_entry() -> None:
    (problem,) = problems_of(host_with(("bare", slot_plugin("bare.value", entry=False))))
    assert problem == (
        "[bare from bare-dist 1.0] ISV slot 'bare.value' has no state-reset entry; "
        "add registrar.state('bare.value', '<category>')"
    )


def test_state_entry_for_another_plugins_slot() -> None:
    def declare(registrar) -> None:
        registrar.state("owned.value", "fold-reset")

    host = host_with(("owner", slot_plugin("owned.value")), ("thief", plugin("thief_plugin", foxhunt_declare=declare)))
    problems = problems_of(host)
    assert "[thief from thief-dist 1.0] state entry 'owned.value' is already declared by plugin 'owner' (from owner-dist 1.0)" in problems


def test_reserved_fingerprint_slot_name_is_a_plugin_problem() -> None:
    def declare(registrar) -> None:
        registrar.slot(FINGERPRINT_SLOT, width=2)
        registrar.state(FINGERPRINT_SLOT, "training-persist")

    (problem,) = problems_of(host_with(("sneaky", plugin("sneaky_plugin", foxhunt_declare=declare))))
    assert problem == "[sneaky from sneaky-dist 1.0] ISV slot name 'isv.fingerprint' is reserved for the layout fingerprint"


def test_hooks_may_take_a_subset_of_the_spec_arguments() -> None:
    def declare() -> None:
        return None

    kernel = Kernel("quiet.kernel", "fold", lambda context: None, "takes no config")
    host = host_with(("quiet", plugin("quiet_plugin", foxhunt_declare=declare, foxhunt_kernels=lambda: [kernel])))
    host.declare().freeze()
    assert host.kernels(config=None) == [kernel]


def test_declare_hook_that_raises_is_reported() -> None:
    def declare(registrar) -> None:
        raise KeyError("missing setting")

    (problem,) = problems_of(host_with(("raiser", plugin("raiser_plugin", foxhunt_declare=declare))))
    assert problem == "[raiser from raiser-dist 1.0] foxhunt_declare raised KeyError: 'missing setting'"


def test_duplicate_component_name_from_two_plugins() -> None:
    host = host_with(
        ("a", plugin("a_plugin", foxhunt_loss_components=lambda config: [loss("dup.loss")])),
        ("b", plugin("b_plugin", foxhunt_loss_components=lambda config: [loss("dup.loss"), loss("b.only")])),
    )
    host.declare().freeze()
    with pytest.raises(PluginError) as caught:
        host.loss_components(config=None)
    (problem,) = caught.value.problems
    assert (problem.plugin, problem.distribution, problem.version) == ("b", "b-dist", "1.0")
    assert problem.message == "component name 'dup.loss' from foxhunt_loss_components is already used by plugin 'a' (from a-dist 1.0)"


def test_component_hook_returning_the_wrong_record_type() -> None:
    host = host_with(("wrong", plugin("wrong_plugin", foxhunt_monitors=lambda config: [loss("not.a.monitor")])))
    host.declare().freeze()
    with pytest.raises(PluginError, match="foxhunt_monitors returned LossComponent, expected AdaptiveMonitor"):
        host.monitors(config=None)


def test_a_monitor_without_its_statistics_entry_is_refused() -> None:
    def watcher(*, entry: bool):
        def declare(registrar) -> None:
            registrar.slot("watched.value")
            registrar.state("watched.value", "fold-reset")
            if entry:
                registrar.state("monitor.watched.watch", "fold-reset", reset=reset_monitor)

        return plugin("watch_plugin", foxhunt_declare=declare,
                      foxhunt_monitors=lambda config: [AdaptiveMonitor("watched.watch", ("watched.value",))])

    host = host_with(("watched", watcher(entry=False)))
    host.declare().freeze()
    with pytest.raises(PluginError) as caught:
        host.monitors(config=None)  # before any run starts: the trainer asks right after freeze
    (problem,) = caught.value.problems
    assert str(problem) == (
        "[watched from watched-dist 1.0] monitor 'watched.watch' keeps statistics in the state entry "
        "'monitor.watched.watch', but no plugin declares it; add registrar.state('monitor.watched.watch', "
        "'fold-reset', reset=foxhunt.monitoring.monitors.reset_monitor) to this plugin's foxhunt_declare"
    )
    host = host_with(("watched", watcher(entry=True)))
    host.declare().freeze()
    assert [monitor.name for monitor in host.monitors(config=None)] == ["watched.watch"]


def test_kernel_may_write_only_its_own_plugins_slots() -> None:
    kernel = Kernel("grabby.kernel", "step", lambda context: None, "writes a slot it does not own", writes=["theirs.value"])
    host = host_with(
        ("theirs", slot_plugin("theirs.value")),
        ("grabby", plugin("grabby_plugin", foxhunt_kernels=lambda config: [kernel])),
    )
    host.declare().freeze()
    with pytest.raises(PluginError) as caught:
        host.kernels(config=None)
    assert str(caught.value.problems[0]) == (
        "[grabby from grabby-dist 1.0] kernel 'grabby.kernel' writes ISV slot 'theirs.value', "
        "which plugin 'grabby' did not declare"
    )


def test_an_encoder_may_write_only_its_own_plugins_slots() -> None:
    def encoder(writes: str) -> Encoder:
        return Encoder("grabby.encoder", 1, lambda *args: None, "writes a slot", slot_values=lambda *args: {},
                       writes=[writes])

    host = host_with(
        ("theirs", slot_plugin("theirs.value")),
        ("grabby", plugin("grabby_plugin", foxhunt_encoders=lambda config: [encoder("theirs.value")])),
    )
    host.declare().freeze()
    with pytest.raises(PluginError) as caught:
        host.encoders(config=None)
    assert str(caught.value.problems[0]) == (
        "[grabby from grabby-dist 1.0] encoder 'grabby.encoder' writes ISV slot 'theirs.value', "
        "which plugin 'grabby' did not declare"
    )
    own = slot_plugin("grabby.value")
    own.foxhunt_encoders = hookimpl(lambda config: [encoder("grabby.value")])
    host = host_with(("grabby", own))
    host.declare().freeze()
    assert [item.writes for item in host.encoders(config=None)] == [("grabby.value",)]


def test_an_encoder_names_its_slots_exactly_when_it_writes_them() -> None:
    with pytest.raises(ValueError, match="slot_values and writes come together"):
        Encoder("lonely.encoder", 1, lambda *args: None, "no writes", slot_values=lambda *args: {})
    with pytest.raises(ValueError, match="slot_values and writes come together"):
        Encoder("lonely.encoder", 1, lambda *args: None, "no values", writes=["lonely.value"])


def test_gradient_combiners_are_collected_and_a_name_taken_twice_is_refused() -> None:
    def combiner(name: str) -> GradientCombiner:
        return GradientCombiner(name, lambda *tensors: None, f"test combiner {name}")

    mine = combiner("mine")
    host = host_with(("a", plugin("a_plugin", foxhunt_gradient_combiners=lambda config: [mine])))
    host.add_core()
    host.declare().freeze()
    assert sorted(c.name for c in host.gradient_combiners(config=None)) == ["budgeted_sum", "mine"]
    clash = host_with(("a", plugin("a_plugin", foxhunt_gradient_combiners=lambda: [combiner("budgeted_sum")])))
    clash.add_core()
    clash.declare().freeze()
    with pytest.raises(PluginError) as caught:
        clash.gradient_combiners(config=None)
    (problem,) = caught.value.problems
    assert problem.message.startswith("component name 'budgeted_sum' from foxhunt_gradient_combiners is already "
                                      "used by plugin ")
    assert {problem.plugin, problem.message.split("plugin ")[1].split(" ")[0].strip("'")} == {"a", "foxhunt.learner"}


def test_declaration_after_freeze_from_a_component_hook_is_reported() -> None:
    kept = []

    def late_components(config):
        kept[0].slot("late.value")
        return []

    def declare(registrar) -> None:
        kept.append(registrar)

    host = host_with(("late", plugin("late_plugin", foxhunt_declare=declare, foxhunt_loss_components=late_components)))
    host.declare().freeze()
    with pytest.raises(PluginError) as caught:
        host.loss_components(config=None)
    (problem,) = caught.value.problems
    assert problem.plugin == "late"
    assert "foxhunt_loss_components raised LifecycleError" in problem.message
    assert "plugin 'late' tried to declare ISV slot 'late.value' after the layout was frozen" in problem.message


def test_incompatible_version_required_by_config(site: Path) -> None:
    fake_dists.write_distribution(site, "x-dist", "1.4.0", {"x": ("x_plugin", "")})
    host = PluginHost(PluginSelection(only=["x"], require={"x": ">=2"})).discover()
    (problem,) = problems_of(host)
    assert problem == "[x from x-dist 1.4.0] config requires x >=2 but version 1.4.0 is installed"


def test_compatible_version_requirement_passes(site: Path) -> None:
    fake_dists.write_distribution(site, "x-dist", "2.1.0", {"x": ("x_plugin", "")})
    host = PluginHost(PluginSelection(require={"x": ">=2,<3"}, only=["x"])).discover()
    host.declare().freeze()
    assert host.versions()["x"] == {"distribution": "x-dist", "version": "2.1.0"}


def test_required_plugin_missing() -> None:
    host = PluginHost(PluginSelection(only=["foxhunt"], require={"ghost": ">=1"})).discover()
    (problem,) = problems_of(host)
    assert problem == "[ghost from (not installed) -] required plugin 'ghost' (>=1) is not installed"


def test_same_plugin_name_twice() -> None:
    host = host_with(("twin", slot_plugin("twin.value")))
    host.add_plugin(slot_plugin("other.value"), "twin", distribution="other-dist", version="2")
    (problem,) = problems_of(host)
    assert problem == "[twin from other-dist 2] plugin name 'twin' is registered twice"


def test_every_problem_of_every_plugin_is_reported_together(site: Path) -> None:
    fake_dists.write_distribution(
        site, "mixed-bag", "0.9.0",
        {
            "broken": ("broken_plugin", fake_dists.IMPORT_ERROR_PLUGIN),
            "typo": ("typo_plugin", fake_dists.MISSPELLED_PLUGIN),
            "old": ("old_plugin", ""),
        },
    )
    host = PluginHost(PluginSelection(only=["broken", "typo", "old"], require={"old": ">=1", "ghost": "==2"}))
    host.discover()
    host.add_plugin(slot_plugin("shared.value"), "first", distribution="first-dist", version="1.0")
    host.add_plugin(slot_plugin("shared.value"), "second", distribution="second-dist", version="3.1")
    host.add_plugin(slot_plugin("bare.value", entry=False), "bare", distribution="bare-dist", version="0.1")
    with pytest.raises(PluginError) as caught:
        host.declare().freeze()
    error = caught.value
    expected = [
        "[broken from mixed-bag 0.9.0] import of 'broken_plugin' failed: RuntimeError:",
        "[typo from mixed-bag 0.9.0] unknown hook 'foxhunt_delcare': no such hookspec (did you mean 'foxhunt_declare'?)",
        "[old from mixed-bag 0.9.0] config requires old >=1 but version 0.9.0 is installed",
        "[ghost from (not installed) -] required plugin 'ghost' (==2) is not installed",
        "[second from second-dist 3.1] ISV slot 'shared.value' is already declared by plugin 'first'",
        "[first from first-dist 1.0] ISV slot 'shared.value' is also declared by plugin 'second' (from second-dist 3.1)",
        "[second from second-dist 3.1] state entry 'shared.value' is already declared by plugin 'first'",
        "[first from first-dist 1.0] state entry 'shared.value' is also declared by plugin 'second' (from second-dist 3.1)",
        "[bare from bare-dist 0.1] ISV slot 'bare.value' has no state-reset entry",
    ]
    assert len(error.problems) == len(expected)
    text = str(error)
    for line in expected:
        assert f"  - {line}" in text, line
    lines = text.splitlines()
    assert lines[0] == f"{len(expected)} plugin problem(s) stop this run:"
    assert lines[-1] == "Fix the plugins above (or disable them in [plugins] of the config) and run again."
    assert all(isinstance(p, PluginProblem) and p.plugin and p.distribution and p.version for p in error.problems)


# -- discovery and selection -------------------------------------------------------
def test_third_party_plugin_is_discovered_through_its_entry_point(site: Path) -> None:
    fake_dists.write_distribution(site, "foxhunt-thirdparty", "1.2.3", {"thirdparty": ("thirdparty_plugin", fake_dists.THIRDPARTY_PLUGIN)})
    host = only("thirdparty").discover()
    info = host.plugins["thirdparty"]
    assert (info.distribution, info.version, info.status) == ("foxhunt-thirdparty", "1.2.3", "loaded")
    assert info.hooks == ["foxhunt_declare", "foxhunt_loss_components"]
    assert info.location == str(site / "thirdparty_plugin.py")
    assert host.plugins["foxhunt"].status == "loaded"  # the core's own declarations come first
    registries = host.declare().freeze()
    slot = registries.layout.slot("thirdparty.gain")
    assert (slot.owner, slot.width, slot.init) == ("thirdparty", 3, 0.5)
    assert registries.state.entry("thirdparty.gain").category == "fold-reset"
    host.start()
    (component,) = [c for c in host.loss_components(config=None) if c.name == "thirdparty.zero"]
    assert component.budget == 1.0
    assert host.versions()["thirdparty"] == {"distribution": "foxhunt-thirdparty", "version": "1.2.3"}


def test_disabled_plugin_is_listed_but_never_imported(site: Path) -> None:
    fake_dists.write_distribution(site, "broken-dist", "0.1", {"broken": ("broken_plugin", fake_dists.IMPORT_ERROR_PLUGIN)})
    host = PluginHost(PluginSelection(disable=["broken"])).discover()
    assert host.plugins["broken"].status == "disabled"
    assert not [p for p in host.problems if p.plugin == "broken"]


def test_only_narrows_the_plugins_and_require_implies_them() -> None:
    selection = PluginSelection(only=["a"], disable=["c"], require={"b": ">=1"})
    assert [selection.selects(name) for name in "abcd"] == [True, True, False, False]
    assert all(PluginSelection().selects(name) for name in "abcd")
    with pytest.raises(ValueError, match="plugin 'b': 'one' is not a version specifier"):
        PluginSelection(require={"b": "one"})


def test_entry_point_group_name() -> None:
    assert ENTRY_POINT_GROUP == "foxhunt.plugins"


# -- lifecycle ----------------------------------------------------------------------
def test_lifecycle_runs_in_order() -> None:
    host = host_with(("ok", slot_plugin("ok.value")))
    assert host.phase is Phase.DISCOVERING
    host.declare()
    assert host.phase is Phase.DECLARING
    host.freeze()
    assert host.phase is Phase.FROZEN
    assert host.loss_components(config=None) == []
    host.start()
    assert host.phase is Phase.RUNNING
    assert host.kernels(config=None) == [] and host.monitors(config=None) == []
    host.close()
    assert host.phase is Phase.CLOSED


@pytest.mark.parametrize(
    ("steps", "call", "message"),
    [
        ([], lambda h: h.freeze(), "cannot freeze while the plugin host is discovering; it must be declaring"),
        (["declare"], lambda h: h.declare(), "cannot declare while the plugin host is declaring; it must be discovering"),
        (
            [],
            lambda h: h.loss_components(None),
            "cannot call foxhunt_loss_components while the plugin host is discovering; it must be frozen or running",
        ),
        (["declare"], lambda h: h.kernels(None), "cannot call foxhunt_kernels while the plugin host is declaring"),
        ([], lambda h: h.start(), "cannot start running while the plugin host is discovering; it must be frozen"),
        (["declare"], lambda h: h.add_plugin(slot_plugin("x.y"), "x"), "cannot add a plugin while the plugin host is declaring"),
        (["declare"], lambda h: h.discover(), "cannot discover plugins while the plugin host is declaring"),
        (["declare", "freeze"], lambda h: h.freeze(), "cannot freeze while the plugin host is frozen; it must be declaring"),
        (["declare", "freeze", "start"], lambda h: h.declare(), "cannot declare while the plugin host is running"),
        (["declare", "freeze", "close"], lambda h: h.monitors(None), "cannot call foxhunt_monitors while the plugin host is closed"),
    ],
)
def test_out_of_order_calls_raise_lifecycle_error(steps: list[str], call, message: str) -> None:
    host = host_with(("ok", slot_plugin("ok.value")))
    for step in steps:
        getattr(host, step)()
    with pytest.raises(LifecycleError) as caught:
        call(host)
    assert str(caught.value).startswith(message)


def test_a_failed_freeze_does_not_freeze_the_host() -> None:
    host = host_with(("bare", slot_plugin("bare.value", entry=False)))
    with pytest.raises(PluginError):
        host.declare().freeze()
    assert host.registries is None
    with pytest.raises(LifecycleError, match="cannot start running while the plugin host is declaring"):
        host.start()


def test_each_host_has_its_own_plugin_manager() -> None:
    first, second = host_with(("a", slot_plugin("a.value"))), PluginHost()
    assert first.pm is not second.pm
    assert second.declare().freeze().layout.names() == (FINGERPRINT_SLOT,)
