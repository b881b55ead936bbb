"""Who writes and who reads each ISV slot, and the slots a kernel writes that nothing reads (``foxhunt audit check``).

A slot that a kernel keeps writing and nobody reads is dead weight at best
(device work every update for nothing) and at worst a sign of a broken
wire-up: the reader was renamed, misspelt, or lives in a plugin that was
removed (invariant 2). Readers are the ``reads`` of every kernel, loss
component and monitor of the loaded plugins, and the slots the core itself
reads (:data:`foxhunt.contract.CORE_READ_SLOTS`: the learner, the trainer, the
environment, the diagnostics). A slot meant for people rather than for the
run, an output, is read by a monitor: that is what puts it in the
``health_diag`` log, the Prometheus gauges and the report, so no other marker
is needed.

The components are asked for twice, as the audit does: with each plugin's
resolved settings and with every opt-in plugin switched on, so an opt-in
plugin's reader counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from foxhunt import contract

__all__ = ["SlotUse", "slot_uses", "readers_by_name", "unread_slots", "unread_problem"]


@attrs.frozen
class SlotUse:
    """One slot: its owner, the components that write it and those that read it (``kind name`` each)."""

    name: str
    owner: str
    writers: tuple[str, ...]
    readers: tuple[str, ...]


def slot_uses(layout: Any, components: Iterable[tuple[str, str, Any]]) -> list[SlotUse]:
    """Every slot of ``layout`` with its writers and readers among ``components`` (``(kind, plugin, record)``)
    and the core."""
    components = list(components)
    writers: dict[str, set[str]] = {}
    for kind, _plugin, item in components:
        for name in getattr(item, "writes", ()):
            writers.setdefault(name, set()).add(f"{kind} {item.name}")
    readers = readers_by_name(components)
    for name in contract.CORE_READ_SLOTS:
        readers.setdefault(name, set()).add("the core")
    return [
        SlotUse(slot.name, slot.owner, tuple(sorted(writers.get(slot.name, ()))), tuple(sorted(readers.get(slot.name, ()))))
        for slot in layout.slots
    ]


def readers_by_name(components: Iterable[tuple[str, str, Any]]) -> dict[str, set[str]]:
    """``{slot or signal name: {"kind name", ...}}`` over the ``reads`` (and a monitor's ``signals``) of
    ``components``. A gradient combiner has no ``reads``: it sees only the update's gradients and losses."""
    readers: dict[str, set[str]] = {}
    for kind, _plugin, item in components:
        for name in (*getattr(item, "reads", ()), *getattr(item, "signals", ())):
            readers.setdefault(name, set()).add(f"{kind} {item.name}")
    return readers


def unread_slots(layout: Any, components: Iterable[tuple[str, str, Any]]) -> list[SlotUse]:
    """Slots some kernel or encoder writes and nothing reads."""
    return [use for use in slot_uses(layout, components) if use.writers and not use.readers]


def unread_problem(use: SlotUse, owner: Any) -> str:
    """The audit's paragraph for one unread slot; ``owner`` is its plugin's ``PluginInfo``."""
    return (
        f"ISV slot {use.name!r} of plugin {use.owner!r} ({owner.distribution} {owner.version}) is written by "
        f"{', '.join(use.writers)} but read by nothing: no kernel, loss component or monitor lists it in reads, and "
        "the core does not read it (foxhunt.contract); list it in the reads of the component that uses it, add a "
        "monitor that reads it if it is an output for people (logs, Prometheus, the report), or stop writing it"
    )
