"""Prometheus export: a real HTTP scrape returns every gauge with run, fold and component labels."""

from __future__ import annotations

import math
import urllib.request

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from foxhunt.metrics_export import MetricsExporter
from foxhunt.monitors import DiagSnapshot

SNAPSHOTS = [
    DiagSnapshot("health", {"health.value": 0.8, "health.raw": 0.7}, 0.9, 0.8),
    DiagSnapshot("gamma", {"gamma.branch[DIRECTION]": 0.98, "gamma.branch[URGENCY]": 0.95}, 0.5, 0.8),
    DiagSnapshot("gradients", {"learner.component_grad_norm[c51]": 3.5, "learner.safety_clips": 0.0}, 0.0, 0.8),
]


def _scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode("utf-8")
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def test_http_scrape_returns_every_gauge_with_labels_and_finite_values():
    exporter = MetricsExporter("run-7")
    exporter.update(SNAPSHOTS, fold=0, epoch=1)
    exporter.update(SNAPSHOTS[:1], fold=1, epoch=2, health=0.6)
    with exporter.serve(0) as server:
        assert server.port > 0
        families = _scrape(server.url)
    values = families["foxhunt_monitor_value"]
    assert len(values) == 2 * 2 + 2 + 2
    for sample in values:
        assert set(sample.labels) == {"run", "fold", "component", "key"}
        assert sample.labels["run"] == "run-7"
        assert math.isfinite(sample.value)
    by_key = {(s.labels["fold"], s.labels["component"], s.labels["key"]): s.value for s in values}
    assert by_key[("0", "gamma", "gamma.branch[URGENCY]")] == pytest.approx(0.95)
    assert by_key[("0", "gradients", "learner.component_grad_norm[c51]")] == pytest.approx(3.5)
    fire = {(s.labels["fold"], s.labels["component"]): s.value for s in families["foxhunt_monitor_fire_rate"]}
    assert fire == {("0", "health"): 0.9, ("0", "gamma"): 0.5, ("0", "gradients"): 0.0, ("1", "health"): 0.9}
    health = {s.labels["fold"]: s.value for s in families["foxhunt_health"]}
    assert health == {"0": pytest.approx(0.8), "1": pytest.approx(0.6)}
    assert {s.labels["fold"]: s.value for s in families["foxhunt_epoch"]} == {"0": 1.0, "1": 2.0}


def test_each_run_has_its_own_registry_and_the_global_one_stays_clean():
    first, second = MetricsExporter("a"), MetricsExporter("b")
    first.update(SNAPSHOTS, fold=0)
    assert 'run="a"' in first.text()
    assert 'run="a"' not in second.text()
    assert REGISTRY.get_sample_value("foxhunt_health", {"run": "a", "fold": "0"}) is None


def test_close_frees_the_port():
    exporter = MetricsExporter("c")
    server = exporter.serve(0)
    port = server.port
    server.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    again = exporter.serve(port)  # the port can be bound again
    again.close()
