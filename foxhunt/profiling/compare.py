"""Comparing two profiles: which phases got slower than a baseline allows.

A pure function over two :class:`~foxhunt.profiling.record.PhaseProfile`
records, so a test (or CI) can run it on recorded files without training
anything. A phase regressed when its seconds per call are at least
``1 + threshold`` times the baseline's (``threshold`` 0.2: 20% slower).
Phases only one side recorded, or that the baseline never ran, are listed
apart and never counted as regressions. Machine keys that differ (another
CPU, GPU, torch build) are reported, since times from another machine
compare poorly; they do not change the verdict.
"""

from __future__ import annotations

import math

import attrs

from foxhunt.profiling.record import PhaseProfile

__all__ = ["DEFAULT_THRESHOLD", "PhaseChange", "Comparison", "compare_profiles"]

DEFAULT_THRESHOLD = 0.2
# Machine keys that say nothing about speed (a rebuilt foxhunt is what a baseline is compared against).
_INCIDENTAL_MACHINE_KEYS = frozenset({"foxhunt"})


@attrs.frozen
class PhaseChange:
    """One phase: seconds per call in the baseline and now, and whether that is a regression."""

    phase: str
    baseline: float
    current: float
    regressed: bool

    @property
    def ratio(self) -> float:
        """Current over baseline seconds per call (1.3: 30% slower)."""
        return self.current / self.baseline if self.baseline > 0 else math.inf


@attrs.frozen
class Comparison:
    """Every phase both profiles timed, the phases only one did, and machine keys that differ."""

    threshold: float
    changes: tuple[PhaseChange, ...]
    unmatched: tuple[str, ...] = ()
    machine_differences: tuple[tuple[str, object, object], ...] = ()

    @property
    def regressions(self) -> tuple[PhaseChange, ...]:
        return tuple(change for change in self.changes if change.regressed)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


def compare_profiles(baseline: PhaseProfile, current: PhaseProfile, threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    """Flag each phase whose seconds per call grew by ``threshold`` (a fraction: 0.2 is 20%) or more."""
    if not threshold >= 0:
        raise ValueError(f"threshold must be a fraction >= 0 (0.2 for 20%), not {threshold!r}")
    changes, unmatched = [], []
    for name in [*baseline.phases, *(p for p in current.phases if p not in baseline.phases)]:
        before, now = baseline.phases.get(name), current.phases.get(name)
        if before is None or now is None or before.calls == 0 or now.calls == 0:
            unmatched.append(name)
            continue
        # a relative tolerance keeps a ratio of exactly 1 + threshold (in decimal) on the flagged side
        limit = before.per_call * (1.0 + threshold) * (1.0 - 1e-12)
        changes.append(PhaseChange(name, before.per_call, now.per_call, now.per_call >= limit))
    keys = sorted((set(baseline.machine) | set(current.machine)) - _INCIDENTAL_MACHINE_KEYS)
    differences = tuple(
        (key, baseline.machine.get(key), current.machine.get(key))
        for key in keys
        if baseline.machine.get(key) != current.machine.get(key)
    )
    return Comparison(threshold, tuple(changes), tuple(unmatched), differences)
