"""The ISV layout and buffer (invariant 4) and the read-only monitor view (invariant 8).

The layout properties are checked with hypothesis over random slot lists: the
fingerprint ignores registration order, follows exactly the slot names, widths
and order, the slots tile the buffer, and any 64-bit value survives the two
float32 lanes bit for bit through every copy a run makes.
"""

from __future__ import annotations

import struct
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from foxhunt import ISV, AdaptiveMonitor, DiagSnapshot, IsvLayout, PluginHost, ReadOnlyISV, Slot, hookimpl
from foxhunt.checkpoint import load_checkpoint, save_checkpoint
from foxhunt.errors import LayoutError, MonitorWriteError
from foxhunt.isv import (
    FINGERPRINT_SLOT,
    FINGERPRINT_WIDTH,
    canonical_encoding,
    fingerprint_to_lanes,
    fnv1a_64,
    lanes_to_fingerprint,
    layout_diff,
)

# -- strategies -------------------------------------------------------------
_part = st.builds(str.__add__, st.sampled_from("abcdefgz"), st.text("abc_019", max_size=4))
slot_names = st.builds(".".join, st.lists(_part, min_size=1, max_size=3)).filter(lambda name: name != FINGERPRINT_SLOT)
widths = st.one_of(st.integers(1, 8), st.integers(1, 0xFFFFFFFF))
owners = st.sampled_from(["alpha", "beta", "gamma", "foxhunt"])
inits = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@st.composite
def slot_lists(draw, min_size: int = 0, max_size: int = 10) -> list[Slot]:
    names = draw(st.lists(slot_names, min_size=min_size, max_size=max_size, unique=True))
    return [Slot(name, draw(widths), draw(owners), draw(st.text(max_size=8)), draw(inits)) for name in names]


def small(slots: list[Slot]) -> list[Slot]:
    """The same slots with widths a real buffer can hold (for tests that allocate the ISV)."""
    return [Slot(s.name, 1 + s.width % 4, s.owner, s.doc, s.init) for s in slots]


def shape(layout: IsvLayout) -> list[tuple[str, int]]:
    return [(slot.name, slot.width) for slot in layout.slots]


# -- FNV-1a -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0xCBF29CE484222325), (b"a", 0xAF63DC4C8601EC8C), (b"foobar", 0x85944171F73967E8)],
)
def test_fnv1a_64_matches_the_published_test_vectors(data: bytes, expected: int) -> None:
    assert fnv1a_64(data) == expected


def test_empty_layout_fingerprint_is_the_offset_basis_and_only_the_fingerprint_slot_exists() -> None:
    layout = IsvLayout.compose([])
    assert layout.fingerprint == 0xCBF29CE484222325
    assert layout.names() == (FINGERPRINT_SLOT,)
    assert layout.size == FINGERPRINT_WIDTH


def test_canonical_encoding_is_name_nul_width_u32_little_endian() -> None:
    slots = [Slot("a.b", 3, "x"), Slot("c", 70000, "y")]
    assert canonical_encoding(slots) == b"a.b\x00" + struct.pack("<I", 3) + b"c\x00" + struct.pack("<I", 70000)
    assert IsvLayout.compose(slots).fingerprint == fnv1a_64(canonical_encoding(slots))


# -- layout invariants --------------------------------------------------------
@given(slot_lists(), st.randoms(use_true_random=False))
def test_fingerprint_and_layout_do_not_depend_on_composition_order(slots: list[Slot], rng) -> None:
    shuffled = list(slots)
    rng.shuffle(shuffled)
    a, b = IsvLayout.compose(slots), IsvLayout.compose(shuffled)
    assert a.fingerprint == b.fingerprint
    assert a.to_records() == b.to_records()


def _plugin(name: str, slots: list[Slot]) -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl
    def foxhunt_declare(registrar) -> None:
        for slot in slots:
            registrar.slot(slot.name, width=slot.width, init=slot.init, doc=slot.doc)
            registrar.state(slot.name, "training-persist")

    module.foxhunt_declare = foxhunt_declare
    return module


@given(slot_lists(min_size=1), st.integers(1, 4), st.randoms(use_true_random=False))
def test_fingerprint_does_not_depend_on_plugin_registration_order(slots: list[Slot], n_plugins: int, rng) -> None:
    groups = {f"plugin{i}": slots[i::n_plugins] for i in range(n_plugins)}
    order = list(groups)
    reordered = list(order)
    rng.shuffle(reordered)
    layouts = []
    for names in (order, reordered):
        host = PluginHost()
        for name in names:
            host.add_plugin(_plugin(name, groups[name]), name)
        layouts.append(host.declare().freeze().layout)
    first, second = layouts
    assert first.fingerprint == second.fingerprint
    assert first.to_records() == second.to_records()
    assert first.fingerprint == IsvLayout.compose(slots).fingerprint


@given(slot_lists(min_size=1), st.data())
def test_fingerprint_changes_when_a_slot_is_renamed(slots: list[Slot], data) -> None:
    index = data.draw(st.integers(0, len(slots) - 1))
    taken = {s.name for s in slots}
    new_name = data.draw(slot_names.filter(lambda name: name not in taken))
    renamed = list(slots)
    renamed[index] = Slot(new_name, slots[index].width, slots[index].owner)
    assert IsvLayout.compose(renamed).fingerprint != IsvLayout.compose(slots).fingerprint


@given(slot_lists(min_size=1), st.data())
def test_fingerprint_changes_when_a_width_changes(slots: list[Slot], data) -> None:
    index = data.draw(st.integers(0, len(slots) - 1))
    new_width = data.draw(widths.filter(lambda w: w != slots[index].width))
    changed = list(slots)
    changed[index] = Slot(slots[index].name, new_width, slots[index].owner)
    assert IsvLayout.compose(changed).fingerprint != IsvLayout.compose(slots).fingerprint


@given(slot_lists(min_size=2), st.data())
def test_hash_of_the_encoding_changes_when_the_slot_order_changes(slots: list[Slot], data) -> None:
    ordered = sorted(slots, key=lambda s: s.name)
    i = data.draw(st.integers(0, len(ordered) - 2))
    j = data.draw(st.integers(i + 1, len(ordered) - 1))
    swapped = list(ordered)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    assert fnv1a_64(canonical_encoding(swapped)) != fnv1a_64(canonical_encoding(ordered))


@given(slot_lists(), st.data())
def test_owner_doc_and_init_do_not_change_the_fingerprint(slots: list[Slot], data) -> None:
    edited = [
        Slot(s.name, s.width, data.draw(owners), data.draw(st.text(max_size=8)), data.draw(inits)) for s in slots
    ]
    assert IsvLayout.compose(edited).fingerprint == IsvLayout.compose(slots).fingerprint


@given(slot_lists(), slot_lists())
def test_fingerprints_are_equal_exactly_when_names_and_widths_are(a: list[Slot], b: list[Slot]) -> None:
    la, lb = IsvLayout.compose(a), IsvLayout.compose(b)
    assert (la.fingerprint == lb.fingerprint) == (shape(la) == shape(lb))
    # The encoding is injective (names cannot hold NUL, widths are fixed-size), so equal bytes mean equal slots.
    ea, eb = canonical_encoding(la.slots), canonical_encoding(lb.slots)
    assert (ea == eb) == (shape(la) == shape(lb))


@given(slot_lists())
def test_slots_are_disjoint_contiguous_and_cover_the_buffer(slots: list[Slot]) -> None:
    layout = IsvLayout.compose(slots)
    cursor = 0
    for slot in layout.slots:
        assert layout.offset(slot.name) == cursor
        assert layout.span(slot.name) == slice(cursor, cursor + slot.width)
        cursor += slot.width
    assert cursor == layout.size
    assert layout.slots[-1].name == FINGERPRINT_SLOT
    assert layout.slots[-1].width == FINGERPRINT_WIDTH
    assert list(layout.names()[:-1]) == sorted(s.name for s in slots)


@given(slot_lists(max_size=6))
def test_every_buffer_position_belongs_to_exactly_one_slot(slots: list[Slot]) -> None:
    layout = IsvLayout.compose(small(slots))
    owner_of = np.full(layout.size, -1)
    for index, name in enumerate(layout.names()):
        assert (owner_of[layout.span(name)] == -1).all()
        owner_of[layout.span(name)] = index
    assert (owner_of >= 0).all()


@given(slot_lists())
def test_records_round_trip_to_the_same_layout(slots: list[Slot]) -> None:
    layout = IsvLayout.compose(slots)
    rebuilt = IsvLayout.from_records(layout.to_records())
    assert rebuilt == layout
    assert rebuilt.fingerprint_hex == f"{layout.fingerprint:016x}"


def test_compose_rejects_duplicate_and_reserved_names() -> None:
    with pytest.raises(LayoutError, match=r"duplicate ISV slot name\(s\): a\.x"):
        IsvLayout.compose([Slot("a.x", 1, "p"), Slot("a.x", 2, "q")])
    with pytest.raises(LayoutError, match="'isv.fingerprint' is reserved for the layout fingerprint"):
        IsvLayout.compose([Slot(FINGERPRINT_SLOT, 2, "p")])


@pytest.mark.parametrize("width", [0, -1, 2**32, True, 1.5, "2"])
def test_slot_width_must_be_an_int_the_encoding_can_hold(width) -> None:
    with pytest.raises(LayoutError, match=r"ISV slot 'a\.b': width must be an int in \[1, 2\*\*32\)"):
        Slot("a.b", width, "p")


@pytest.mark.parametrize("name", ["", "a..b", "1abc", "a-b", "a.b ", "tau value"])
def test_slot_name_must_be_a_dotted_identifier(name: str) -> None:
    with pytest.raises(LayoutError, match="must be a dotted identifier"):
        Slot(name, 1, "p")


def test_layout_lookups_of_an_unknown_slot_list_the_known_ones() -> None:
    layout = IsvLayout.compose([Slot("tau.value", 1, "p")])
    for lookup in (layout.slot, layout.offset, layout.span):
        with pytest.raises(LayoutError, match=r"no ISV slot named 'tau\.vlaue'; known slots: tau\.value, isv\.fingerprint"):
            lookup("tau.vlaue")


def test_layout_diff_names_removed_and_added_slots() -> None:
    old = IsvLayout.compose([Slot("a", 1, "p"), Slot("b", 2, "p")])
    new = IsvLayout.compose([Slot("a", 1, "p"), Slot("b", 3, "p"), Slot("c", 1, "q")])
    assert layout_diff(old, new).splitlines() == ["-b width=2 owner=p", "+b width=3 owner=p", "+c width=1 owner=q"]
    assert layout_diff(old, old) == "(slots identical)"


def test_layout_diff_of_one_added_slot_is_one_line_whatever_offsets_it_shifts() -> None:
    old = IsvLayout.compose([Slot(f"s{i:02d}", 1, "p") for i in range(1, 42)])
    new = IsvLayout.compose([*(s for s in old.slots if s.name != FINGERPRINT_SLOT), Slot("s00", 1, "extra")])  # sorts first: every offset shifts
    assert layout_diff(old, new) == "+s00 width=1 owner=extra"


# -- the 64-bit fingerprint in two float32 lanes --------------------------------
NAN_PATTERNS = [
    0xFFFFFFFF_7FC00001,  # low lane a quiet NaN with payload, high lane all ones (a negative NaN)
    0x7FC00001_FFFFFFFF,
    0x7F800001_7F800001,  # signalling NaNs: a float conversion would quiet them
    0xFF800001_FFBFFFFF,
    0x7F800000_FF800000,  # +inf / -inf
    0x80000000_00000001,  # -0.0 and the smallest denormal
    0x00000000_00000000,
    0xFFFFFFFF_FFFFFFFF,
]
u64 = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from(NAN_PATTERNS))


def _examples(test):
    for value in NAN_PATTERNS:
        test = example(value)(test)
    return test


@given(u64)
@_examples
def test_lanes_hold_the_low_word_first_bit_exact(value: int) -> None:
    lanes = fingerprint_to_lanes(value)
    assert lanes.dtype == np.float32 and lanes.shape == (2,)
    assert lanes.view(np.uint32).tolist() == [value & 0xFFFFFFFF, value >> 32]
    assert lanes_to_fingerprint(lanes) == value


@given(u64)
@_examples
def test_lanes_round_trip_through_numpy_and_torch_copies(value: int) -> None:
    lanes = fingerprint_to_lanes(value)
    numpy_copies = [lanes.copy(), np.array(lanes), np.copy(lanes), np.concatenate([lanes[:1], lanes[1:]])]
    tensor = torch.from_numpy(lanes.copy())
    torch_copies = [
        tensor.clone(),
        tensor.to("cpu", copy=True),
        tensor.to(torch.float32, copy=True),
        torch.empty(2, dtype=torch.float32).copy_(tensor),
        torch.tensor(lanes),
        torch.cat([tensor[:1], tensor[1:]]),
        tensor.detach().contiguous(),
    ]
    for copy in numpy_copies + torch_copies + [t.numpy() for t in torch_copies]:
        assert lanes_to_fingerprint(copy) == value


def _isv_with_lanes(value: int) -> ISV:
    isv = ISV(IsvLayout.compose([Slot("a.x", 3, "p", init=1.5)]))
    isv.view(FINGERPRINT_SLOT).copy_(torch.from_numpy(fingerprint_to_lanes(value)))
    return isv


@given(u64)
@_examples
def test_lanes_round_trip_through_the_isv_and_its_snapshot(value: int) -> None:
    isv = _isv_with_lanes(value)
    assert isv.stored_fingerprint() == value
    isv.write("a.x", 7.0)
    isv.reset_slot("a.x")
    assert isv.stored_fingerprint() == value
    assert lanes_to_fingerprint(isv.snapshot()[FINGERPRINT_SLOT]) == value
    assert lanes_to_fingerprint(isv.tensor.clone()[isv.layout.span(FINGERPRINT_SLOT)]) == value


@given(u64)
@_examples
def test_lanes_round_trip_through_a_safetensors_checkpoint(value: int) -> None:
    isv = _isv_with_lanes(value)
    with tempfile.TemporaryDirectory() as directory:
        save_checkpoint(Path(directory), {"isv": isv.tensor}, {}, isv.layout)
        tensors, _ = load_checkpoint(Path(directory), isv.layout)
    assert lanes_to_fingerprint(tensors["isv"][isv.layout.span(FINGERPRINT_SLOT)]) == value
    assert tensors["isv"].view(torch.int32).tolist() == isv.tensor.view(torch.int32).tolist()


@given(slot_lists(max_size=6))
def test_a_new_isv_holds_its_layout_fingerprint_and_every_init(slots: list[Slot]) -> None:
    layout = IsvLayout.compose(small(slots))
    isv = ISV(layout)
    assert isv.tensor.dtype == torch.float32 and isv.tensor.shape == (layout.size,)
    assert isv.stored_fingerprint() == layout.fingerprint
    for slot in slots:
        assert isv.view(slot.name).tolist() == [slot.init] * layout.width(slot.name)
    isv.tensor.fill_(3.0)
    isv.reset_all()
    assert isv.stored_fingerprint() == layout.fingerprint


def test_isv_named_access_writes_only_its_own_slot() -> None:
    isv = ISV(IsvLayout.compose([Slot("a.x", 2, "p", init=1.0), Slot("b.y", 3, "p", init=2.0)]))
    isv.write("b.y", 5.0)
    assert isv.view("b.y").tolist() == [5.0, 5.0, 5.0]
    assert isv.view("a.x").tolist() == [1.0, 1.0]
    isv.write("b.y", torch.tensor([1.0, 2.0, 3.0]))
    assert isv.view("b.y").tolist() == [1.0, 2.0, 3.0]
    isv.reset_slot("b.y")
    assert isv.view("b.y").tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(LayoutError, match="no ISV slot named 'c.z'"):
        isv.write("c.z", 1.0)


# -- monitors see a read-only snapshot ------------------------------------------
@pytest.fixture
def isv() -> ISV:
    isv = ISV(IsvLayout.compose([Slot("tau.value", 1, "p", init=0.25), Slot("gamma.branch", 4, "p", init=0.99)]))
    isv.write("gamma.branch", torch.tensor([0.9, 0.95, 0.99, 0.999]))
    return isv


def test_snapshot_reads_values_by_slot_name(isv: ISV) -> None:
    view = isv.snapshot()
    assert isinstance(view, ReadOnlyISV)
    assert view.value("tau.value") == 0.25
    np.testing.assert_array_equal(view["gamma.branch"], np.float32([0.9, 0.95, 0.99, 0.999]))
    assert lanes_to_fingerprint(view[FINGERPRINT_SLOT]) == isv.layout.fingerprint


def test_monitor_writes_raise_and_leave_the_isv_unchanged(isv: ISV) -> None:
    before = isv.tensor.clone()
    view = isv.snapshot()
    with pytest.raises(MonitorWriteError, match="monitors are read-only: attempted to write ISV slot 'tau.value'"):
        view["tau.value"] = 1.0
    with pytest.raises(MonitorWriteError, match="monitors are read-only: attempted to set 'layout'"):
        view.layout = None
    with pytest.raises(MonitorWriteError, match="attempted to set '_values'"):
        view._values = np.zeros(3)
    with pytest.raises(ValueError, match="read-only"):
        view["tau.value"][0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        view["gamma.branch"] += 1.0
    with pytest.raises(ValueError, match="read-only"):
        view.as_array()[:] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        np.add(view["gamma.branch"], 1.0, out=view["gamma.branch"])
    with pytest.raises(ValueError, match="WRITEABLE"):
        view["tau.value"].flags.writeable = True
    assert torch.equal(isv.tensor.view(torch.int32), before.view(torch.int32))
    assert view.value("tau.value") == 0.25


def test_snapshot_is_a_copy_taken_at_that_moment(isv: ISV) -> None:
    view = isv.snapshot()
    isv.write("tau.value", 0.5)
    assert view.value("tau.value") == 0.25
    assert isv.snapshot().value("tau.value") == 0.5


class _WritingMonitor(AdaptiveMonitor):
    name = "bad.monitor"
    reads = ("tau.value",)

    def diagnose(self, view: ReadOnlyISV) -> DiagSnapshot:
        view["tau.value"] = 0.0
        return super().diagnose(view)


def test_a_monitor_that_tries_to_write_is_stopped(isv: ISV) -> None:
    before = isv.tensor.clone()
    with pytest.raises(MonitorWriteError):
        _WritingMonitor().diagnose(isv.snapshot())
    assert torch.equal(isv.tensor, before)


def test_monitor_fire_rate_and_diagnosis(isv: ISV) -> None:
    monitor = AdaptiveMonitor("tau.watch", ("tau.value", "gamma.branch"))
    for tau in (0.25, 0.25, 0.5, 0.5, 0.75):
        isv.write("tau.value", tau)
        monitor.observe(isv.snapshot())
    assert (monitor.observations, monitor.fires) == (5, 2)
    assert monitor.fire_rate == 0.5
    snapshot = monitor.diagnose(isv.snapshot())
    assert snapshot.name == "tau.watch"
    assert snapshot.values["tau.value"] == 0.75
    assert set(snapshot.values) == {"tau.value", "gamma.branch[0]", "gamma.branch[1]", "gamma.branch[2]", "gamma.branch[3]"}
    assert snapshot.health is None
    assert snapshot.to_dict()["fire_rate"] == 0.5
    monitor.reset_statistics()
    assert (monitor.observations, monitor.fires, monitor.fire_rate) == (0, 0, 0.0)


def test_monitor_needs_a_name_and_reads() -> None:
    with pytest.raises(ValueError, match="a monitor needs a name and at least one"):
        AdaptiveMonitor("x", ())
