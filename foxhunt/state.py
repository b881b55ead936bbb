"""The state-reset registry: every piece of training state, its category and its reset dispatch.

Invariant 1: every ISV slot and every other piece of training state (optimizer
moments, PopArt statistics, replay contents, target network, portfolio state,
monitor statistics) has an entry here. Freeze fails when a slot has no entry or
a resetting category has no dispatch; a fold boundary iterates the registry and
runs each fold-reset and soft-reset dispatch, and a window boundary (the start
of every epoch: the window of experience that epoch collects) runs each
window-reset dispatch.

Declaration and binding are separate on purpose: plugins *declare* entries
before any object exists (so the registry can be checked and snapshotted), and
the runtime *attaches* the live object under the entry's name once it is built.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from foxhunt.errors import StateRegistryError

__all__ = ["ResetCategory", "StateEntry", "StateRegistry"]


class ResetCategory(enum.StrEnum):
    """What happens to a piece of state at boundaries."""

    FOLD_RESET = "fold-reset"  # back to its initial value at every fold start
    WINDOW_RESET = "window-reset"  # back to its initial value at every training window: each epoch's start
    SOFT_RESET = "soft-reset"  # set to a bootstrap value at the fold start, then decays toward observations
    TRAINING_PERSIST = "training-persist"  # carried across folds untouched
    SCHEMA_CONTRACT = "schema-contract"  # fixed by the layout itself (e.g. the fingerprint); never reset


RESETTING = (ResetCategory.FOLD_RESET, ResetCategory.WINDOW_RESET, ResetCategory.SOFT_RESET)


@attrs.frozen
class StateEntry:
    """One registry row.

    ``reset`` receives the attached object; for an ISV slot entry leave it
    ``None`` and the registry writes the slot's declared ``init`` (the
    bootstrap value, for soft-reset slots). ``decay_steps`` documents how fast a
    soft-reset value returns to observed values (the owning kernel's EMA length).
    ``factory`` (optional) builds the live object when the run starts, for
    state that a plugin owns outside the ISV (the trainer attaches its result).
    """

    name: str
    owner: str
    category: ResetCategory = attrs.field(converter=ResetCategory)
    reset: Callable[[Any], None] | None = None
    decay_steps: int | None = None
    doc: str = ""
    is_isv_slot: bool = False
    factory: Callable[[], Any] | None = None

    def has_dispatch(self) -> bool:
        return self.reset is not None or self.is_isv_slot


class StateRegistry:
    """Holds the entries (frozen with the layout) and the objects attached at run time."""

    def __init__(self, entries: Iterable[StateEntry]) -> None:
        self._entries: dict[str, StateEntry] = {}
        for entry in entries:
            if entry.name in self._entries:
                raise StateRegistryError(f"state entry {entry.name!r} declared twice")
            self._entries[entry.name] = entry
        self._objects: dict[str, Any] = {}
        self._isv: Any = None

    def entries(self) -> tuple[StateEntry, ...]:
        return tuple(sorted(self._entries.values(), key=lambda e: e.name))

    def entry(self, name: str) -> StateEntry:
        try:
            return self._entries[name]
        except KeyError:
            raise StateRegistryError(
                f"no state entry named {name!r}; declare it with registrar.state({name!r}, ...) in foxhunt_declare"
            ) from None

    def attach_isv(self, isv: Any) -> None:
        """Bind the live ISV: every ISV-slot entry resets through it."""
        self._isv = isv

    def attach(self, name: str, obj: Any) -> None:
        """Bind the live object that entry ``name`` resets."""
        entry = self.entry(name)
        if entry.is_isv_slot:
            raise StateRegistryError(f"state entry {name!r} is an ISV slot; the ISV is attached with attach_isv")
        self._objects[name] = obj

    def attached(self, name: str) -> Any:
        self.entry(name)
        return self._objects.get(name)

    def attach_factories(self) -> list[str]:
        """Build and attach every unattached entry that declared a ``factory``; returns their names."""
        built = []
        for entry in self.entries():
            if entry.factory is not None and entry.name not in self._objects:
                self._objects[entry.name] = entry.factory()
                built.append(entry.name)
        return built

    def unattached(self) -> list[str]:
        """Resetting entries with no live object yet: state declared but never wired into the run."""
        return [
            e.name
            for e in self.entries()
            if e.category in RESETTING and not e.is_isv_slot and e.name not in self._objects
        ]

    def reset(self, name: str) -> None:
        """Run one entry's dispatch."""
        entry = self.entry(name)
        if entry.is_isv_slot:
            if self._isv is None:
                raise StateRegistryError(f"cannot reset ISV slot {name!r}: no ISV attached to the registry")
            if entry.reset is not None:
                entry.reset(self._isv)
            else:
                self._isv.reset_slot(name)
            return
        if entry.reset is None:
            raise StateRegistryError(f"state entry {name!r} ({entry.category}) has no reset dispatch")
        if name not in self._objects:
            raise StateRegistryError(
                f"state entry {name!r} (owner {entry.owner}) has no live object; the runtime must call "
                f"registry.attach({name!r}, obj) after building it"
            )
        entry.reset(self._objects[name])

    def _run(self, categories: tuple[ResetCategory, ...]) -> list[str]:
        names = [e.name for e in self.entries() if e.category in categories]
        for name in names:
            self.reset(name)
        return names

    def fold_boundary(self) -> list[str]:
        """Reset every fold-reset and soft-reset entry; returns the names reset, in order."""
        return self._run((ResetCategory.FOLD_RESET, ResetCategory.SOFT_RESET))

    def window_boundary(self) -> list[str]:
        """Reset every window-reset entry (the trainer calls this before each epoch's first step)."""
        return self._run((ResetCategory.WINDOW_RESET,))

    def to_records(self) -> list[dict[str, object]]:
        """Rows for the registry snapshot and ``foxhunt plugins inspect``."""
        return [
            {
                "name": e.name,
                "owner": e.owner,
                "category": str(e.category),
                "isv_slot": e.is_isv_slot,
                "decay_steps": e.decay_steps,
                "doc": e.doc,
            }
            for e in self.entries()
        ]
