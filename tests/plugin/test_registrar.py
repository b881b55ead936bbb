"""The registrar a plugin's ``foxhunt_declare`` receives, and the declare/freeze lifecycle.

The rule-based state machine interleaves declarations from several plugins,
freeze, fold resets, random ISV writes and late declarations, and checks every
outcome against a small model of what the registries must contain.
"""

from __future__ import annotations

import types

import pytest
import torch
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from foxhunt import ISV, DimTable, PluginHost, Registrar, ResetCategory, auto, hookimpl
from foxhunt.dims import table_as_dict
from foxhunt.errors import LifecycleError, PluginError
from foxhunt.isv import FINGERPRINT_SLOT
from foxhunt.plugin.registrar import Declarations


def plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, function in hooks.items():
        setattr(module, hook_name, hookimpl(function))
    return module


def declared(*plugins: tuple[str, types.ModuleType]) -> PluginHost:
    host = PluginHost()
    for name, module in plugins:
        host.add_plugin(module, name)
    return host.declare()


# -- registrar methods ----------------------------------------------------------
def test_claims_are_recorded_with_their_owner() -> None:
    declarations = Declarations()
    registrar = Registrar("alpha", declarations)
    assert registrar.slot("tau.value", width=2, init=0.5, doc="Polyak rate") == "tau.value"
    assert registrar.state("tau.value", ResetCategory.FOLD_RESET) == "tau.value"
    assert registrar.state("opt.moments", "training-persist", doc="Adam moments") == "opt.moments"
    (slot,) = declarations.slots
    assert (slot.name, slot.width, slot.init, slot.owner, slot.doc) == ("tau.value", 2, 0.5, "alpha", "Polyak rate")
    assert [(e.name, e.owner, e.category) for e in declarations.states] == [
        ("tau.value", "alpha", ResetCategory.FOLD_RESET),
        ("opt.moments", "alpha", ResetCategory.TRAINING_PERSIST),
    ]
    assert declarations.problems == []


def test_invalid_claims_are_collected_not_raised() -> None:
    declarations = Declarations()
    registrar = Registrar("alpha", declarations)
    registrar.slot("bad name")
    registrar.slot("a.b", width=0)
    registrar.state("x.y", "fold-rest")
    registrar.state("ema.value", "soft-reset", reset=lambda obj: None)
    registrar.dims(int)
    messages = [message for owner, message in declarations.problems]
    assert {owner for owner, _ in declarations.problems} == {"alpha"}
    assert len(messages) == 5
    assert "invalid ISV slot 'bad name'" in messages[0] and "dotted identifier" in messages[0]
    assert "invalid ISV slot 'a.b'" in messages[1] and "width must be an int" in messages[1]
    assert messages[2] == (
        "state entry 'x.y': unknown category 'fold-rest' "
        "(use one of: fold-reset, window-reset, soft-reset, training-persist, schema-contract)"
    )
    assert messages[3] == "soft-reset state entry 'ema.value' needs decay_steps (the EMA length it decays over)"
    assert messages[4] == "dims() takes a DimTable subclass, got <class 'int'>"


class Fields(DimTable):
    """Three named positions."""

    FIRST = auto()
    SECOND = auto()
    THIRD = auto()


def test_dim_tables_count_from_zero_and_work_as_indices() -> None:
    assert [int(m) for m in Fields] == [0, 1, 2]
    assert Fields.size() == 3 and Fields.names() == ("FIRST", "SECOND", "THIRD")
    assert table_as_dict(Fields) == {"FIRST": 0, "SECOND": 1, "THIRD": 2}
    buffer = torch.arange(6).reshape(2, Fields.size())
    assert buffer[:, Fields.THIRD].tolist() == [2, 5]


def test_dim_tables_are_published_once_and_a_name_clash_names_the_first_owner() -> None:
    declarations = Declarations()
    alpha, beta = Registrar("alpha", declarations), Registrar("beta", declarations)
    assert alpha.dims(Fields) is Fields
    alpha.dims(Fields)  # the same table again is harmless

    class Other(DimTable):
        X = auto()

    Other.__name__ = "Fields"
    beta.dims(Other)
    assert declarations.dims == {"Fields": ("alpha", Fields)}
    assert declarations.problems == [("beta", "dimension table 'Fields' is already declared by plugin 'alpha'")]


def test_declaring_after_freeze_raises_and_names_the_plugin() -> None:
    kept: list[Registrar] = []

    def declare(registrar: Registrar) -> None:
        kept.append(registrar)
        registrar.slot("late.value")
        registrar.state("late.value", "fold-reset")

    host = declared(("late", plugin("late_plugin", foxhunt_declare=declare)))
    registries = host.freeze()
    (registrar,) = kept
    calls = {
        "ISV slot 'extra.value'": lambda: registrar.slot("extra.value"),
        "state entry 'extra.value'": lambda: registrar.state("extra.value", "fold-reset"),
        "dimension table 'Fields'": lambda: registrar.dims(Fields),
    }
    for what, call in calls.items():
        with pytest.raises(LifecycleError) as caught:
            call()
        assert str(caught.value) == (
            f"plugin 'late' tried to declare {what} after the layout was frozen; declare everything inside foxhunt_declare"
        )
    assert registries.layout.names() == ("late.value", FINGERPRINT_SLOT)
    assert len(host.declarations.slots) == 1


# -- stateful: declare / freeze / reset / late declare --------------------------
PLUGINS = ("alpha", "beta", "gamma")
NAMES = ("a.x", "b.y", "c.z", "d.w", "e.v", "f.u")
CATEGORIES = tuple(ResetCategory)
RESETTING = (ResetCategory.FOLD_RESET, ResetCategory.WINDOW_RESET, ResetCategory.SOFT_RESET)


class DeclareFreezeReset(RuleBasedStateMachine):
    """Each plugin keeps the registrar it was given, so declarations can interleave freely before freeze."""

    def __init__(self) -> None:
        super().__init__()
        self.registrars: dict[str, Registrar] = {}
        self.host = PluginHost()
        for name in PLUGINS:
            self.host.add_plugin(plugin(f"{name}_module", foxhunt_declare=self._keeper(name)), name)
        self.host.declare()
        self.slot_decls: list[tuple[str, str, int, float]] = []  # (owner, name, width, init) in order
        self.state_decls: list[tuple[str, str, ResetCategory]] = []  # (owner, name, category)
        self.outcome: str = "open"  # open | frozen | failed
        self.registries = None
        self.isv: ISV | None = None
        self.values: dict[str, list[float]] = {}
        self.categories: dict[str, ResetCategory] = {}

    def _keeper(self, name: str):
        def declare(registrar: Registrar) -> None:
            self.registrars[name] = registrar

        return declare

    # -- model of freeze (the rules of invariant 1) --
    def expected_problems(self) -> list[str]:
        problems: list[str] = []
        slot_owner: dict[str, str] = {}
        for owner, name, _, _ in self.slot_decls:
            if name in slot_owner:
                problems.append(f"[{owner} from (in-process) 0] ISV slot {name!r} is already declared by plugin {slot_owner[name]!r} (from (in-process) 0)")
                if slot_owner[name] != owner:  # both sides of a clash are told
                    problems.append(f"[{slot_owner[name]} from (in-process) 0] ISV slot {name!r} is also declared by plugin {owner!r} (from (in-process) 0)")
            else:
                slot_owner[name] = owner
        entries: dict[str, str] = {}
        for owner, name, category in self.state_decls:
            if name in entries:
                problems.append(f"[{owner} from (in-process) 0] state entry {name!r} is already declared by plugin {entries[name]!r} (from (in-process) 0)")
                if entries[name] != owner:
                    problems.append(f"[{entries[name]} from (in-process) 0] state entry {name!r} is also declared by plugin {owner!r} (from (in-process) 0)")
            elif name in slot_owner and slot_owner[name] != owner:
                problems.append(f"[{owner} from (in-process) 0] state entry {name!r} resets a slot owned by {slot_owner[name]!r}")
            else:
                if name not in slot_owner and category in RESETTING:
                    problems.append(f"[{owner} from (in-process) 0] state entry {name!r} ({category}) has no reset dispatch")
                entries[name] = owner
        for name, owner in slot_owner.items():
            if name not in entries:
                problems.append(f"[{owner} from (in-process) 0] ISV slot {name!r} has no state-reset entry")
        return problems

    @precondition(lambda self: self.outcome == "open")
    @rule(owner=st.sampled_from(PLUGINS), name=st.sampled_from(NAMES), width=st.integers(1, 3),
          init=st.sampled_from([0.0, 1.0, -2.5, 0.125]))
    def declare_slot(self, owner: str, name: str, width: int, init: float) -> None:
        self.registrars[owner].slot(name, width=width, init=init)
        self.slot_decls.append((owner, name, width, init))

    @precondition(lambda self: self.outcome == "open")
    @rule(owner=st.sampled_from(PLUGINS), name=st.sampled_from(NAMES), width=st.integers(1, 3),
          init=st.sampled_from([0.0, 1.0, -2.5, 0.125]), category=st.sampled_from(CATEGORIES))
    def declare_slot_with_entry(self, owner: str, name: str, width: int, init: float, category: ResetCategory) -> None:
        """What a correct plugin does: a slot and its state entry together."""
        self.declare_slot(owner, name, width, init)
        self.declare_state(owner, name, category)

    @precondition(lambda self: self.outcome == "open")
    @rule(owner=st.sampled_from(PLUGINS), name=st.sampled_from(NAMES), category=st.sampled_from(CATEGORIES))
    def declare_state(self, owner: str, name: str, category: ResetCategory) -> None:
        decay = 10 if category is ResetCategory.SOFT_RESET else None
        self.registrars[owner].state(name, category, decay_steps=decay)
        self.state_decls.append((owner, name, category))

    @precondition(lambda self: self.outcome == "open")
    @rule()
    def freeze(self) -> None:
        expected = self.expected_problems()
        if expected:
            with pytest.raises(PluginError) as caught:
                self.host.freeze()
            actual = [str(problem) for problem in caught.value.problems]
            assert len(actual) == len(expected)
            for line in expected:
                assert any(problem.startswith(line) for problem in actual), (line, actual)
            assert str(caught.value).startswith(f"{len(expected)} plugin problem(s) stop this run:")
            self.outcome = "failed"
            event("freeze refused")
            return
        self.registries = self.host.freeze()
        self.outcome = "frozen"
        event("freeze succeeded")
        self.isv = ISV(self.registries.layout)
        self.registries.state.attach_isv(self.isv)
        for _, name, width, init in self.slot_decls:
            self.values[name] = [init] * width
        for _, name, category in self.state_decls:
            self.categories[name] = category

    @precondition(lambda self: self.outcome == "frozen" and bool(self.values))
    @rule(data=st.data())
    def write(self, data) -> None:
        name = data.draw(st.sampled_from(sorted(self.values)))
        value = data.draw(st.sampled_from([3.0, -7.25, 1e6, 0.0]))
        self.isv.write(name, value)
        self.values[name] = [value] * len(self.values[name])

    def _reset(self, boundary: str, categories: tuple[ResetCategory, ...]) -> None:
        names = getattr(self.registries.state, boundary)()
        expected = sorted(n for n, c in self.categories.items() if c in categories)
        assert names == expected
        for _, name, width, init in self.slot_decls:
            if self.categories[name] in categories:
                self.values[name] = [init] * width

    @precondition(lambda self: self.outcome == "frozen")
    @rule()
    def fold_reset(self) -> None:
        self._reset("fold_boundary", (ResetCategory.FOLD_RESET, ResetCategory.SOFT_RESET))

    @precondition(lambda self: self.outcome == "frozen")
    @rule()
    def window_reset(self) -> None:
        self._reset("window_boundary", (ResetCategory.WINDOW_RESET,))

    @precondition(lambda self: self.outcome != "open")
    @rule(owner=st.sampled_from(PLUGINS), name=st.sampled_from(NAMES + ("late.slot",)))
    def late_declare(self, owner: str, name: str) -> None:
        before = len(self.host.declarations.slots)
        with pytest.raises(LifecycleError, match=f"plugin '{owner}' tried to declare ISV slot '{name}' after the layout was frozen"):
            self.registrars[owner].slot(name)
        with pytest.raises(LifecycleError, match=f"plugin '{owner}' tried to declare state entry '{name}'"):
            self.registrars[owner].state(name, "fold-reset")
        assert len(self.host.declarations.slots) == before

    @invariant()
    def layout_tiles_the_buffer(self) -> None:
        if self.outcome != "frozen":
            return
        layout = self.registries.layout
        cursor = 0
        for slot in layout.slots:
            assert layout.offset(slot.name) == cursor
            cursor += slot.width
        assert cursor == layout.size == self.isv.tensor.numel()
        assert self.isv.stored_fingerprint() == layout.fingerprint

    @invariant()
    def isv_matches_the_model(self) -> None:
        if self.outcome != "frozen":
            return
        for name, values in self.values.items():
            assert self.isv.view(name).tolist() == values, name


DeclareFreezeReset.TestCase.settings = settings(settings(), stateful_step_count=25)
test_declare_freeze_reset_state_machine = DeclareFreezeReset.TestCase
