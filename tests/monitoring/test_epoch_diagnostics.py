"""One ``health_diag`` event per epoch boundary, carrying every monitor's snapshot."""

from __future__ import annotations

import json
import math

import numpy as np
import torch
from structlog.testing import capture_logs

from foxhunt.monitoring.epoch_diagnostics import HEALTH_DIAG_EVENT, emit_health_diag, epoch_diagnostics
from foxhunt.isv import ISV, IsvLayout, Slot
from foxhunt.monitoring.metrics_export import MetricsExporter
from foxhunt.monitoring.monitors import AdaptiveMonitor, DiagSnapshot


def _isv() -> ISV:
    isv = ISV(IsvLayout.compose([Slot("health.value", 1, "health", init=0.75), Slot("tau.value", 1, "tau")]))
    isv.write("tau.value", 0.01)
    return isv


def test_epoch_diagnostics_emits_one_event_with_every_snapshot():
    isv = _isv()
    monitors = [
        AdaptiveMonitor("tau", ("tau.value",)),
        AdaptiveMonitor("health", ("health.value",)),
        AdaptiveMonitor("q_stats", signals=("learner.q_mean",)),
    ]
    signals = {"learner.q_mean": torch.tensor([1.0, 2.0])}
    exporter = MetricsExporter("run-a")
    with capture_logs() as logs:
        snapshots = epoch_diagnostics(monitors, isv, fold=2, epoch=5, signals=signals, exporter=exporter,
                                      labels={"learner.q_mean": ("x", "y")})
    events = [entry for entry in logs if entry["event"] == HEALTH_DIAG_EVENT]
    assert len(events) == 1
    event = events[0]
    assert (event["fold"], event["epoch"], event["health"], event["log_level"]) == (2, 5, 0.75, "info")
    assert [s["name"] for s in event["snapshots"]] == ["tau", "health", "q_stats"]
    assert event["snapshots"][2]["values"] == {"learner.q_mean[x]": 1.0, "learner.q_mean[y]": 2.0}
    assert [s.name for s in snapshots] == ["tau", "health", "q_stats"]
    assert all(m.observations == 1 for m in monitors)
    json.dumps(event)  # the JSON renderer can write it as it is
    assert 'foxhunt_health{fold="2",run="run-a"} 0.75' in exporter.text()


def test_non_finite_values_are_listed_and_logged_as_a_warning():
    snapshots = [DiagSnapshot("support", {"a": 1.0, "b": math.nan}, 0.0), DiagSnapshot("tau", {"c": math.inf}, 0.0)]
    with capture_logs() as logs:
        fields = emit_health_diag(snapshots, fold=0, epoch=1)
    assert fields["non_finite"] == ["support:b", "tau:c"]
    assert logs[0]["log_level"] == "warning"


def test_monitors_see_a_copy_not_the_live_isv():
    isv = _isv()

    class Vandal(AdaptiveMonitor):
        name = "vandal"
        reads = ("tau.value",)

        def diagnose(self, view, signals=None):
            try:
                view.as_array()[0] = 123.0
            except ValueError:
                pass
            return super().diagnose(view, signals)

    before = isv.tensor.clone()
    with capture_logs():
        epoch_diagnostics([Vandal()], isv, fold=0, epoch=0)
    assert torch.equal(before, isv.tensor)
    assert np.isclose(isv.view("tau.value").item(), 0.01)
