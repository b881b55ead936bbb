"""``foxhunt profile``: where a training step spends its time, and whether that got worse.

:mod:`~foxhunt.profiling.record` is the per-phase record (the baseline file),
:mod:`~foxhunt.profiling.compare` the pure comparison of two records,
:mod:`~foxhunt.profiling.session` the profiled run itself (docs/profiling.md).
"""

from __future__ import annotations

from foxhunt.profiling.compare import DEFAULT_THRESHOLD, Comparison, PhaseChange, compare_profiles
from foxhunt.profiling.record import PHASES, PhaseProfile, PhaseTime, load_profile, machine_info, save_profile
from foxhunt.profiling.session import OpRow, ProfileOptions, ProfileResult, profile_run, range_name

__all__ = [
    "PHASES",
    "PhaseTime",
    "PhaseProfile",
    "machine_info",
    "save_profile",
    "load_profile",
    "DEFAULT_THRESHOLD",
    "PhaseChange",
    "Comparison",
    "compare_profiles",
    "OpRow",
    "ProfileOptions",
    "ProfileResult",
    "profile_run",
    "range_name",
]
