"""The read-only observer protocol: adaptive monitors and their diagnostic snapshots.

Kernels compute adaptive values on the device and write them into the ISV; a
monitor only *observes* them (invariant 8). It is handed a
:class:`~foxhunt.isv.ReadOnlyISV` snapshot, so a write raises instead of
corrupting training state. Monitors of learner statistics that live outside
the ISV (gradient-component norms, Q statistics) also get a
:class:`SignalSnapshot`: a read-only host copy of named device tensors, taken
once per observation outside the training step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np
import torch

from foxhunt import contract
from foxhunt.errors import MonitorWriteError
from foxhunt.isv import ReadOnlyISV

__all__ = ["DiagSnapshot", "AdaptiveMonitor", "SignalSnapshot", "attach_monitors", "reset_monitor", "MONITOR_STATE_PREFIX"]

MONITOR_STATE_PREFIX = "monitor."  # a monitor's statistics are the state entry ``monitor.<name>``


@attrs.frozen
class DiagSnapshot:
    """What a monitor reports at an epoch boundary (logged and exported as Prometheus gauges)."""

    name: str
    values: dict[str, float]
    fire_rate: float
    health: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "values": dict(self.values), "fire_rate": self.fire_rate, "health": self.health}


class SignalSnapshot:
    """Read-only host copies of named device tensors, with optional labels per element.

    ``labels[name]`` names the elements of a 1-D signal (e.g. the loss
    components behind ``learner.component_grad_norm``). Every write raises
    :class:`~foxhunt.errors.MonitorWriteError`.
    """

    __slots__ = ("_values", "_labels")

    def __init__(self, values: Mapping[str, np.ndarray], labels: Mapping[str, Iterable[str]] | None = None) -> None:
        frozen: dict[str, np.ndarray] = {}
        for name, value in values.items():
            array = np.array(value, copy=True)
            array.flags.writeable = False
            frozen[name] = array
        object.__setattr__(self, "_values", frozen)
        object.__setattr__(self, "_labels", {name: tuple(names) for name, names in (labels or {}).items()})

    @classmethod
    def capture(
        cls, signals: Mapping[str, torch.Tensor], labels: Mapping[str, Iterable[str]] | None = None
    ) -> SignalSnapshot:
        """Copy every tensor to the host once (outside the step: this synchronises with the device)."""
        return cls({name: tensor.detach().cpu().numpy() for name, tensor in signals.items()}, labels)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self._values[name]
        except KeyError:
            known = ", ".join(sorted(self._values)) or "none"
            raise KeyError(f"no signal {name!r} in the snapshot (signals: {known})") from None

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._values))

    def labels(self, name: str) -> tuple[str, ...]:
        """Element names of signal ``name``: its labels, else ``0, 1, ...``."""
        size = int(np.size(self[name]))
        given = self._labels.get(name)
        if given is not None and len(given) == size:
            return given
        return tuple(str(i) for i in range(size))

    def __setitem__(self, name: str, value: object) -> None:
        raise MonitorWriteError(f"monitors are read-only: attempted to write signal {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise MonitorWriteError(f"monitors are read-only: attempted to set {name!r} on the signal snapshot")


class AdaptiveMonitor:
    """Observe ISV slots (and, optionally, learner signals); count how often the device-computed value changes.

    Subclasses set ``name`` and ``reads`` (ISV slots) and/or ``signals``
    (signal names), or pass them to ``__init__``, optionally ``labels`` (element
    names of wide slots and signals, e.g. ``Branch.names()``), and may override
    :meth:`diagnose` to add derived values. The statistics a monitor keeps
    (``observations``, ``fires``) are monitor state: the owning plugin
    registers the entry :attr:`state_name` in the state-reset registry with
    :func:`reset_monitor` as its dispatch, and the runtime attaches the monitor
    with :func:`attach_monitors`.
    """

    name: str = ""
    reads: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()
    labels: Mapping[str, tuple[str, ...]] = MappingProxyType({})  # element names per slot or signal (e.g. Branch names)

    def __init__(
        self,
        name: str | None = None,
        reads: tuple[str, ...] | None = None,
        signals: tuple[str, ...] | None = None,
    ) -> None:
        if name is not None:
            self.name = name
        if reads is not None:
            self.reads = tuple(reads)
        if signals is not None:
            self.signals = tuple(signals)
        if not self.name or not (self.reads or self.signals):
            raise ValueError(
                f"{type(self).__name__}: a monitor needs a name and at least one ISV slot in reads or one signal in signals"
            )
        self.reset_statistics()

    @property
    def state_name(self) -> str:
        """The state-reset entry that holds this monitor's statistics."""
        return MONITOR_STATE_PREFIX + self.name

    def reset_statistics(self) -> None:
        self.observations = 0
        self.fires = 0
        self._last: np.ndarray | None = None

    def read(self, view: ReadOnlyISV, signals: SignalSnapshot | None = None) -> dict[str, np.ndarray]:
        """Current values of the slots (and the signals present in ``signals``) this monitor reads, as copies."""
        values = {slot: np.array(view[slot], dtype=np.float64) for slot in self.reads}
        if signals is not None:
            values.update({name: np.array(signals[name], dtype=np.float64).ravel() for name in self.signals if name in signals})
        return values

    def observe(self, view: ReadOnlyISV, signals: SignalSnapshot | None = None) -> None:
        """Record the current values; a *fire* is an observation whose values differ from the previous one."""
        values = self.read(view, signals)
        if not values:  # a signal-only monitor observed without its signals has nothing to record
            return
        self._record(np.concatenate([np.ravel(v) for v in values.values()]).astype(np.float64))

    def _record(self, current: np.ndarray) -> None:
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
        return view.value(contract.HEALTH) if contract.HEALTH in view.layout.offsets else None

    def element_names(self, name: str, size: int, signals: SignalSnapshot | None = None) -> tuple[str, ...]:
        """Names of the elements of slot or signal ``name``: the monitor's ``labels``, the snapshot's, else indices."""
        given = self.labels.get(name)
        if given is not None and len(given) == size:
            return tuple(given)
        if signals is not None and name in signals:
            return signals.labels(name)
        return tuple(str(i) for i in range(size))

    def diagnose(self, view: ReadOnlyISV, signals: SignalSnapshot | None = None) -> DiagSnapshot:
        """Snapshot of the current values (a width-w slot or signal flattened to ``name[element]`` keys)."""
        values: dict[str, float] = {}
        for name, array in self.read(view, signals).items():
            flat = array.ravel()
            if flat.size == 1:
                values[name] = float(flat[0])
            else:
                elements = self.element_names(name, flat.size, signals)
                values.update({f"{name}[{element}]": float(v) for element, v in zip(elements, flat, strict=True)})
        return DiagSnapshot(self.name, values, self.fire_rate, self.health(view))


def reset_monitor(monitor: AdaptiveMonitor) -> None:
    """State-reset dispatch of a monitor's statistics entry."""
    monitor.reset_statistics()


def attach_monitors(registry: Any, monitors: Iterable[AdaptiveMonitor]) -> list[str]:
    """Attach every monitor whose statistics entry the registry declares; returns the entry names attached."""
    attached = []
    declared = {entry.name for entry in registry.entries()}
    for monitor in monitors:
        if monitor.state_name in declared:
            registry.attach(monitor.state_name, monitor)
            attached.append(monitor.state_name)
    return attached
