"""The baseline comparison, on a profile recorded by ``foxhunt profile --save-baseline`` (tests/fixtures).

The fixture was recorded on a 2-core CPU with the trainer testkit's tiny run
(50 steps, 3 epoch boundaries); nothing here trains, so the verdicts are exact.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from foxhunt.profiling import PHASES, PhaseTime, compare_profiles, load_profile

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "profile_baseline_cpu.json"


@pytest.fixture
def baseline():
    return load_profile(FIXTURE)


def test_the_recorded_baseline_times_every_phase(baseline) -> None:
    assert set(baseline.phases) == set(PHASES)
    assert all(time.calls > 0 and time.seconds > 0 for time in baseline.phases.values())
    assert baseline.machine["device"] == "cpu"


def test_the_same_times_are_no_regression(baseline) -> None:
    comparison = compare_profiles(baseline, baseline)
    assert not comparison.regressed
    assert [c.phase for c in comparison.changes] == list(baseline.phases)
    assert all(c.ratio == pytest.approx(1.0) for c in comparison.changes)


@pytest.mark.parametrize("phase", PHASES)
def test_a_30_percent_slowdown_of_one_phase_is_flagged(baseline, phase) -> None:
    slower = baseline.with_phase(phase, baseline.phases[phase].scaled(1.3))
    comparison = compare_profiles(baseline, slower)
    assert comparison.regressed
    assert [c.phase for c in comparison.regressions] == [phase]
    assert comparison.regressions[0].ratio == pytest.approx(1.3)


@pytest.mark.parametrize("phase", PHASES)
def test_a_10_percent_slowdown_is_not(baseline, phase) -> None:
    slower = baseline.with_phase(phase, baseline.phases[phase].scaled(1.1))
    assert not compare_profiles(baseline, slower).regressed


def test_the_threshold_is_configurable_and_inclusive(baseline) -> None:
    slower = baseline.with_phase("update", baseline.phases["update"].scaled(1.1))
    assert compare_profiles(baseline, slower, threshold=0.05).regressed
    assert compare_profiles(baseline, slower, threshold=0.1).regressed  # "by 10% or more"
    assert not compare_profiles(baseline, slower, threshold=0.11).regressed


def test_times_are_compared_per_call_so_longer_runs_compare(baseline) -> None:
    collect = baseline.phases["collect"]
    longer = baseline.with_phase("collect", PhaseTime(collect.calls * 4, collect.seconds * 4))
    assert not compare_profiles(baseline, longer).regressed


def test_faster_is_never_a_regression(baseline) -> None:
    faster = baseline.with_phase("validation", baseline.phases["validation"].scaled(0.2))
    assert not compare_profiles(baseline, faster).regressed


def test_phases_timed_on_one_side_only_are_listed_not_flagged(baseline) -> None:
    current = baseline.with_phase("checkpoint", PhaseTime(0, 0.0)).with_phase("export", PhaseTime(1, 9.0))
    comparison = compare_profiles(baseline, current)
    assert comparison.unmatched == ("checkpoint", "export")
    assert not comparison.regressed


def test_another_machine_is_reported(baseline) -> None:
    elsewhere = attrs.evolve(baseline, machine={**baseline.machine, "device": "cuda", "device_name": "H200"})
    differences = {key: (before, now) for key, before, now in compare_profiles(baseline, elsewhere).machine_differences}
    assert differences == {"device": ("cpu", "cuda"), "device_name": (None, "H200")}


def test_a_negative_threshold_is_refused(baseline) -> None:
    with pytest.raises(ValueError, match="threshold"):
        compare_profiles(baseline, baseline, threshold=-0.1)
