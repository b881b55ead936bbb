"""The state-reset registry (invariant 1): categories, dispatch at fold and window boundaries, binding."""

from __future__ import annotations

import types

import pytest
import torch

from foxhunt import ISV, PluginHost, ResetCategory, StateRegistry, hookimpl
from foxhunt.errors import PluginError, StateRegistryError
from foxhunt.isv import FINGERPRINT_SLOT
from foxhunt.plugin.registrar import Declarations, Registrar
from foxhunt.state import StateEntry

SLOTS = {  # name: (category, init)
    "fold.slot": (ResetCategory.FOLD_RESET, 1.0),
    "soft.slot": (ResetCategory.SOFT_RESET, 0.5),
    "window.slot": (ResetCategory.WINDOW_RESET, -1.0),
    "persist.slot": (ResetCategory.TRAINING_PERSIST, 2.0),
    "schema.slot": (ResetCategory.SCHEMA_CONTRACT, 3.0),
}


class Moments:
    """Stand-in for a piece of non-ISV training state (optimizer moments, replay contents...)."""

    def __init__(self) -> None:
        self.values = [1.0, 2.0]
        self.resets = 0

    def clear(self) -> None:
        self.values = [0.0, 0.0]
        self.resets += 1


def _declare(registrar) -> None:
    for name, (category, init) in SLOTS.items():
        registrar.slot(name, width=2, init=init)
        registrar.state(name, category, decay_steps=100 if category is ResetCategory.SOFT_RESET else None)
    registrar.state("opt.moments", "fold-reset", reset=Moments.clear, doc="Adam moments")
    registrar.state("replay.contents", "window-reset", reset=Moments.clear)
    registrar.state("target.net", "training-persist")
    registrar.state("ema.stats", "soft-reset", reset=Moments.clear, decay_steps=50)


@pytest.fixture
def wired() -> tuple[StateRegistry, ISV, dict[str, Moments]]:
    module = types.ModuleType("stateful_plugin")
    module.foxhunt_declare = hookimpl(_declare)
    host = PluginHost()
    host.add_plugin(module, "stateful")
    registries = host.declare().freeze()
    isv = ISV(registries.layout)
    registries.state.attach_isv(isv)
    objects = {name: Moments() for name in ("opt.moments", "replay.contents", "ema.stats")}
    for name, obj in objects.items():
        registries.state.attach(name, obj)
    for name in SLOTS:
        isv.write(name, 9.0)
    return registries.state, isv, objects


def test_fold_boundary_resets_fold_and_soft_entries_and_leaves_the_rest(wired) -> None:
    registry, isv, objects = wired
    fingerprint = isv.stored_fingerprint()
    reset = registry.fold_boundary()
    assert reset == ["ema.stats", "fold.slot", "opt.moments", "soft.slot"]
    assert isv.view("fold.slot").tolist() == [1.0, 1.0]
    assert isv.view("soft.slot").tolist() == [0.5, 0.5]  # the bootstrap value
    assert isv.view("window.slot").tolist() == [9.0, 9.0]
    assert isv.view("persist.slot").tolist() == [9.0, 9.0]
    assert isv.view("schema.slot").tolist() == [9.0, 9.0]
    assert objects["opt.moments"].resets == 1 and objects["ema.stats"].resets == 1
    assert objects["replay.contents"].resets == 0
    assert isv.stored_fingerprint() == fingerprint


def test_window_boundary_resets_only_window_entries(wired) -> None:
    registry, isv, objects = wired
    assert registry.window_boundary() == ["replay.contents", "window.slot"]
    assert isv.view("window.slot").tolist() == [-1.0, -1.0]
    assert isv.view("fold.slot").tolist() == [9.0, 9.0]
    assert objects["replay.contents"].values == [0.0, 0.0]
    assert objects["opt.moments"].resets == 0


def test_registry_rows_carry_category_owner_and_whether_it_is_a_slot(wired) -> None:
    registry, _, _ = wired
    rows = {row["name"]: row for row in registry.to_records()}
    assert list(rows) == sorted(rows)
    assert rows["soft.slot"] == {
        "name": "soft.slot", "owner": "stateful", "category": "soft-reset", "isv_slot": True, "decay_steps": 100, "doc": "",
    }
    assert rows["opt.moments"]["isv_slot"] is False and rows["opt.moments"]["doc"] == "Adam moments"
    assert rows[FINGERPRINT_SLOT]["category"] == "schema-contract" and rows[FINGERPRINT_SLOT]["owner"] == "foxhunt"
    assert registry.entry("opt.moments").has_dispatch()
    assert not registry.entry("target.net").has_dispatch()


def test_unknown_name_is_an_error_that_says_how_to_declare_it(wired) -> None:
    registry, _, _ = wired
    message = "no state entry named 'nope'; declare it with registrar.state('nope', ...) in foxhunt_declare"
    for call in (registry.reset, registry.entry, registry.attached, lambda name: registry.attach(name, object())):
        with pytest.raises(StateRegistryError) as caught:
            call("nope")
        assert str(caught.value) == message


def test_declared_state_never_attached_stops_the_fold_boundary() -> None:
    registry = StateRegistry([StateEntry("opt.moments", "learner", "fold-reset", reset=Moments.clear)])
    assert registry.unattached() == ["opt.moments"]
    with pytest.raises(StateRegistryError) as caught:
        registry.fold_boundary()
    assert str(caught.value) == (
        "state entry 'opt.moments' (owner learner) has no live object; the runtime must call "
        "registry.attach('opt.moments', obj) after building it"
    )
    moments = Moments()
    registry.attach("opt.moments", moments)
    assert registry.unattached() == []
    assert registry.attached("opt.moments") is moments
    assert registry.fold_boundary() == ["opt.moments"] and moments.resets == 1


def test_isv_slot_entries_need_the_isv_attached_and_refuse_attach() -> None:
    entry = StateEntry("tau.value", "p", "fold-reset", is_isv_slot=True)
    registry = StateRegistry([entry])
    with pytest.raises(StateRegistryError, match="cannot reset ISV slot 'tau.value': no ISV attached to the registry"):
        registry.fold_boundary()
    with pytest.raises(StateRegistryError, match="is an ISV slot; the ISV is attached with attach_isv"):
        registry.attach("tau.value", object())


def test_an_isv_slot_entry_may_bring_its_own_reset() -> None:
    def declare(registrar) -> None:
        registrar.slot("gain.value", width=3, init=1.0)
        registrar.state("gain.value", "fold-reset", reset=lambda isv: isv.write("gain.value", torch.tensor([1.0, 2.0, 3.0])))

    module = types.ModuleType("custom_reset")
    module.foxhunt_declare = hookimpl(declare)
    host = PluginHost()
    host.add_plugin(module, "custom")
    registries = host.declare().freeze()
    isv = ISV(registries.layout)
    registries.state.attach_isv(isv)
    registries.state.fold_boundary()
    assert isv.view("gain.value").tolist() == [1.0, 2.0, 3.0]


def test_entry_without_dispatch_cannot_be_reset_by_name() -> None:
    registry = StateRegistry([StateEntry("target.net", "learner", "training-persist")])
    with pytest.raises(StateRegistryError, match=r"state entry 'target.net' \(training-persist\) has no reset dispatch"):
        registry.reset("target.net")
    assert registry.fold_boundary() == [] and registry.window_boundary() == []


def test_entries_are_unique() -> None:
    entry = StateEntry("x", "p", "fold-reset", reset=print)
    with pytest.raises(StateRegistryError, match="state entry 'x' declared twice"):
        StateRegistry([entry, entry])


def test_unknown_category_string_is_rejected() -> None:
    with pytest.raises(ValueError, match="'fold' is not a valid ResetCategory"):
        StateEntry("x", "p", "fold")


def test_freeze_requires_a_dispatch_for_resetting_non_slot_state() -> None:
    def declare(registrar) -> None:
        registrar.state("opt.moments", "fold-reset")
        registrar.state("replay.contents", "window-reset")
        registrar.state("target.net", "training-persist")

    module = types.ModuleType("no_dispatch")
    module.foxhunt_declare = hookimpl(declare)
    host = PluginHost()
    host.add_plugin(module, "nodispatch", distribution="nodispatch-dist", version="0.3")
    with pytest.raises(PluginError) as caught:
        host.declare().freeze()
    assert [str(p) for p in caught.value.problems] == [
        "[nodispatch from nodispatch-dist 0.3] state entry 'opt.moments' (fold-reset) has no reset dispatch; pass reset=callable",
        "[nodispatch from nodispatch-dist 0.3] state entry 'replay.contents' (window-reset) has no reset dispatch; pass reset=callable",
    ]


def test_a_plugin_owned_object_is_built_by_its_factory_and_reset_through_the_registry():
    declarations = Declarations()
    built = []

    def make() -> dict:
        built.append(1)
        return {"count": 5}

    Registrar("stats_plugin", declarations).state(
        "stats_plugin.counts", "fold-reset", reset=lambda obj: obj.update(count=0), factory=make
    )
    registry = StateRegistry(declarations.states)
    assert registry.unattached() == ["stats_plugin.counts"]
    assert registry.attach_factories() == ["stats_plugin.counts"]
    assert registry.unattached() == [] and len(built) == 1
    assert registry.attached("stats_plugin.counts") == {"count": 5}
    registry.fold_boundary()
    assert registry.attached("stats_plugin.counts") == {"count": 0}
    assert registry.attach_factories() == []  # already attached: never built twice
