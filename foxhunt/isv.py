"""The ISV (internal state vector): one float32 device buffer of named slots.

Adaptive kernels write adaptive values into it; the learner, the environment
and the monitors read them. The layout is composed from every plugin's slot
declarations in a canonical order (sorted by slot name, so plugin registration
order cannot change it), and its 64-bit FNV-1a fingerprint is stored bit-exact
in the last two float32 slots (invariant 4): a checkpoint made with another
layout is refused by comparing fingerprints, with a slot-level diff.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

import attrs
import numpy as np
import torch

from foxhunt.errors import LayoutError, MonitorWriteError

__all__ = [
    "Slot",
    "IsvLayout",
    "ISV",
    "ReadOnlyISV",
    "fnv1a_64",
    "FINGERPRINT_SLOT",
    "FINGERPRINT_WIDTH",
    "fingerprint_to_lanes",
    "lanes_to_fingerprint",
    "layout_diff",
]

FNV_OFFSET_BASIS = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK_64 = 0xFFFFFFFFFFFFFFFF

FINGERPRINT_SLOT = "isv.fingerprint"
FINGERPRINT_WIDTH = 2  # two float32 lanes carry the 64-bit hash: low word first


def fnv1a_64(data: bytes) -> int:
    """64-bit FNV-1a hash of ``data``."""
    value = FNV_OFFSET_BASIS
    for byte in data:
        value ^= byte
        value = (value * FNV_PRIME) & MASK_64
    return value


def fingerprint_to_lanes(fingerprint: int) -> np.ndarray:
    """Split a 64-bit value into two float32 lanes whose *bits* are its low and high words."""
    words = np.array([fingerprint & 0xFFFFFFFF, fingerprint >> 32], dtype=np.uint32)
    return words.view(np.float32)


def lanes_to_fingerprint(lanes: np.ndarray | torch.Tensor) -> int:
    """Inverse of :func:`fingerprint_to_lanes`: read the bits back, never the float values."""
    if isinstance(lanes, torch.Tensor):
        lanes = lanes.detach().cpu().contiguous().view(torch.int32).numpy()
    words = np.ascontiguousarray(lanes).view(np.uint32)
    return int(words[0]) | (int(words[1]) << 32)


def _slot_name(instance: Slot, attribute: attrs.Attribute, value: str) -> None:
    if not value or not all(part.isidentifier() for part in value.split(".")):
        raise LayoutError(f"ISV slot name must be a dotted identifier such as 'tau.value', got {value!r}")


def _positive_width(instance: Slot, attribute: attrs.Attribute, value: int) -> None:
    # The canonical encoding stores the width as u32; a bool is an int to Python but never a width.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 0xFFFFFFFF:
        raise LayoutError(f"ISV slot {instance.name!r}: width must be an int in [1, 2**32), got {value!r}")


@attrs.frozen
class Slot:
    """One named region of the ISV. ``init`` is its value after construction and after a fold reset."""

    name: str = attrs.field(validator=_slot_name)
    width: int = attrs.field(validator=_positive_width)
    owner: str
    doc: str = ""
    init: float = 0.0


@attrs.frozen
class IsvLayout:
    """The composed, frozen slot list with offsets and fingerprint.

    Build with :meth:`compose`; the fingerprint slot is always last.
    """

    slots: tuple[Slot, ...]
    offsets: Mapping[str, int]
    fingerprint: int
    size: int

    @classmethod
    def compose(cls, slots: Iterable[Slot]) -> IsvLayout:
        """Order slots canonically (by name), assign contiguous offsets, append the fingerprint slot."""
        ordered = sorted(slots, key=lambda slot: slot.name)
        names = [slot.name for slot in ordered]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise LayoutError(f"duplicate ISV slot name(s): {', '.join(duplicates)}")
        if FINGERPRINT_SLOT in names:
            raise LayoutError(f"slot name {FINGERPRINT_SLOT!r} is reserved for the layout fingerprint")
        fingerprint = fnv1a_64(canonical_encoding(ordered))
        ordered.append(Slot(FINGERPRINT_SLOT, FINGERPRINT_WIDTH, "foxhunt", "64-bit FNV-1a layout fingerprint"))
        offsets: dict[str, int] = {}
        cursor = 0
        for slot in ordered:
            offsets[slot.name] = cursor
            cursor += slot.width
        return cls(tuple(ordered), offsets, fingerprint, cursor)

    def slot(self, name: str) -> Slot:
        for slot in self.slots:
            if slot.name == name:
                return slot
        raise LayoutError(f"no ISV slot named {name!r}; known slots: {', '.join(self.names())}")

    def names(self) -> tuple[str, ...]:
        return tuple(slot.name for slot in self.slots)

    def offset(self, name: str) -> int:
        try:
            return self.offsets[name]
        except KeyError:
            raise LayoutError(f"no ISV slot named {name!r}; known slots: {', '.join(self.names())}") from None

    def width(self, name: str) -> int:
        return self.slot(name).width

    def span(self, name: str) -> slice:
        """The ``slice`` of the buffer that holds slot ``name``."""
        start = self.offset(name)
        return slice(start, start + self.width(name))

    @property
    def fingerprint_hex(self) -> str:
        return f"{self.fingerprint:016x}"

    def to_records(self) -> list[dict[str, object]]:
        """Slots as plain dicts (for JSON, TOML snapshots and checkpoints)."""
        return [
            {"name": s.name, "offset": self.offsets[s.name], "width": s.width, "owner": s.owner, "init": s.init, "doc": s.doc}
            for s in self.slots
        ]

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, object]]) -> IsvLayout:
        """Rebuild a layout (e.g. a checkpoint's) from :meth:`to_records` output."""
        slots = [
            Slot(str(r["name"]), int(r["width"]), str(r["owner"]), str(r.get("doc", "")), float(r.get("init", 0.0)))
            for r in records
            if r["name"] != FINGERPRINT_SLOT
        ]
        return cls.compose(slots)


def canonical_encoding(ordered_slots: Iterable[Slot]) -> bytes:
    """Bytes hashed for the fingerprint: per slot, its UTF-8 name, a NUL, and its width as u32 LE.

    Only name, width and order count; owner, doc and init do not change the layout.
    """
    parts = []
    for slot in ordered_slots:
        parts.append(slot.name.encode("utf-8") + b"\x00" + struct.pack("<I", slot.width))
    return b"".join(parts)


def layout_diff(old: IsvLayout, new: IsvLayout) -> str:
    """The slots that differ, by name (``-`` only in ``old`` or its width there, ``+`` only in ``new`` or its width).

    Offsets are left out: they follow from the sorted names and widths, so one added slot would otherwise
    show every slot after it as changed.
    """
    before = {s.name: s for s in old.slots if s.name != FINGERPRINT_SLOT}
    after = {s.name: s for s in new.slots if s.name != FINGERPRINT_SLOT}
    lines = []
    for name in sorted(set(before) | set(after)):
        was, now = before.get(name), after.get(name)
        if was is not None and now is not None and was.width == now.width:
            continue
        lines += [f"{sign}{slot.name} width={slot.width} owner={slot.owner}" for sign, slot in (("-", was), ("+", now))
                  if slot is not None]
    return "\n".join(lines) if lines else "(slots identical)"


class ISV:
    """The live buffer: a float32 tensor on the run's device with named access."""

    def __init__(self, layout: IsvLayout, device: torch.device | str = "cpu") -> None:
        self.layout = layout
        self.tensor = torch.zeros(layout.size, dtype=torch.float32, device=device)
        self.reset_all()

    def reset_all(self) -> None:
        """Write every slot's ``init`` value and the fingerprint lanes."""
        values = np.zeros(self.layout.size, dtype=np.float32)
        for slot in self.layout.slots:
            values[self.layout.span(slot.name)] = slot.init
        values[self.layout.span(FINGERPRINT_SLOT)] = fingerprint_to_lanes(self.layout.fingerprint)
        self.tensor.copy_(torch.from_numpy(values))

    def view(self, name: str) -> torch.Tensor:
        """A writable view of one slot (shares memory with the buffer)."""
        return self.tensor[self.layout.span(name)]

    def write(self, name: str, value: float | torch.Tensor) -> None:
        """Write a slot (outside the hot path: kernels write through their own views)."""
        self.view(name).copy_(torch.as_tensor(value, dtype=torch.float32).expand(self.layout.width(name)))

    def reset_slot(self, name: str) -> None:
        """Write one slot back to its declared ``init``."""
        self.view(name).fill_(self.layout.slot(name).init)

    def stored_fingerprint(self) -> int:
        return lanes_to_fingerprint(self.view(FINGERPRINT_SLOT))

    def snapshot(self) -> ReadOnlyISV:
        """A read-only host copy for monitors (one device-to-host copy, outside the step)."""
        return ReadOnlyISV(self.layout, self.tensor.detach().cpu().numpy().copy())


class ReadOnlyISV:
    """What a monitor sees: values by slot name; every write raises :class:`MonitorWriteError`."""

    __slots__ = ("layout", "_values")

    def __init__(self, layout: IsvLayout, values: np.ndarray) -> None:
        values.flags.writeable = False
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "_values", values)

    def __getitem__(self, name: str) -> np.ndarray:
        """Slot values as a read-only float32 array (its width long)."""
        return self._values[self.layout.span(name)]

    def value(self, name: str) -> float:
        """A width-1 slot as a Python float."""
        return float(self[name][0])

    def __setitem__(self, name: str, value: object) -> None:
        raise MonitorWriteError(f"monitors are read-only: attempted to write ISV slot {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise MonitorWriteError(f"monitors are read-only: attempted to set {name!r} on the ISV snapshot")

    def as_array(self) -> np.ndarray:
        return self._values
