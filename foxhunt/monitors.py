"""The read-only observer protocol: adaptive monitors and their diagnostic snapshots.

Kernels compute adaptive values on the device and write them into the ISV; a
monitor only *observes* them (invariant 8). It is handed a
:class:`~foxhunt.isv.ReadOnlyISV` snapshot, so a write raises instead of
corrupting training state.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from foxhunt.isv import ReadOnlyISV

__all__ = ["DiagSnapshot", "AdaptiveMonitor"]


@attrs.frozen
class DiagSnapshot:
    """What a monitor reports at an epoch boundary (logged and exported as Prometheus gauges)."""

    name: str
    values: dict[str, float]
    fire_rate: float
    health: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "values": dict(self.values), "fire_rate": self.fire_rate, "health": self.health}


class AdaptiveMonitor:
    """Observe ISV slots; count how often the device-computed value changes.

    Subclasses set ``name`` and ``reads`` (or pass them to ``__init__``) and may
    override :meth:`diagnose` to add derived values. The statistics a monitor
    keeps (``observations``, ``fires``) are monitor state: the owning plugin
    registers them in the state-reset registry and attaches the monitor, whose
    :meth:`reset_statistics` is the dispatch.
    """

    name: str = ""
    reads: tuple[str, ...] = ()

    def __init__(self, name: str | None = None, reads: tuple[str, ...] | None = None) -> None:
        if name is not None:
            self.name = name
        if reads is not None:
            self.reads = tuple(reads)
        if not self.name or not self.reads:
            raise ValueError(f"{type(self).__name__}: a monitor needs a name and at least one slot in reads")
        self.reset_statistics()

    def reset_statistics(self) -> None:
        self.observations = 0
        self.fires = 0
        self._last: np.ndarray | None = None

    def read(self, view: ReadOnlyISV) -> dict[str, np.ndarray]:
        """Current values of the slots this monitor reads (copies: the caller cannot write through them)."""
        return {slot: np.array(view[slot], dtype=np.float64) for slot in self.reads}

    def observe(self, view: ReadOnlyISV) -> None:
        """Record the current values; a *fire* is an observation whose values differ from the previous one."""
        current = np.concatenate([np.ravel(view[slot]) for slot in self.reads]).astype(np.float64)
        if self._last is not None and not np.array_equal(current, self._last):
            self.fires += 1
        self._last = current
        self.observations += 1

    @property
    def fire_rate(self) -> float:
        """Fraction of observations (after the first) at which the value changed; 0 before two observations."""
        return self.fires / (self.observations - 1) if self.observations > 1 else 0.0

    def health(self, view: ReadOnlyISV) -> float | None:
        """Learning health in [0, 1] if the layout has the ``health.value`` slot, else ``None``."""
        return view.value("health.value") if "health.value" in view.layout.offsets else None

    def diagnose(self, view: ReadOnlyISV) -> DiagSnapshot:
        """Snapshot of the current values (each width-w slot flattened to ``slot[i]`` keys)."""
        values: dict[str, float] = {}
        for slot, array in self.read(view).items():
            if array.size == 1:
                values[slot] = float(array[0])
            else:
                values.update({f"{slot}[{i}]": float(v) for i, v in enumerate(array)})
        return DiagSnapshot(self.name, values, self.fire_rate, self.health(view))
