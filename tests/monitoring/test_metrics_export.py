"""Prometheus export: a real HTTP scrape returns every gauge with run, fold and component labels."""

from __future__ import annotations

import math
import re
import socket
import urllib.request

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from trainer_testkit import invoke, train_args

from foxhunt.errors import FoxhuntError
from foxhunt.monitoring.metrics_export import MetricsEndpoint, MetricsExporter, check_endpoint, parse_endpoint
from foxhunt.monitoring.monitors import DiagSnapshot

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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def port_in_use():
    """A real listening socket on 127.0.0.1, as another program holding the port would have."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_metrics_endpoint_parses_port_alone_as_loopback_and_takes_an_address():
    assert parse_endpoint("9100") == MetricsEndpoint(9100, "127.0.0.1")
    assert parse_endpoint("0.0.0.0:9100") == MetricsEndpoint(9100, "0.0.0.0")
    assert parse_endpoint("localhost:9100") == MetricsEndpoint(9100, "localhost")
    assert parse_endpoint("[::1]:9100") == MetricsEndpoint(9100, "::1")
    assert str(MetricsEndpoint(9100, "::1")) == "[::1]:9100"
    for bad in ("", "abc", "0", "70000", "host:", ":9100", "::1:9100", "1.2.3.4:port"):
        with pytest.raises(ValueError, match=r"\[HOST:\]PORT|port must be a number"):
            parse_endpoint(bad)


def test_the_server_binds_loopback_unless_an_address_is_given():
    port = _free_port()
    with MetricsExporter("d").serve(parse_endpoint(str(port))) as server:
        assert (server.host, server.port) == ("127.0.0.1", port)
        assert _scrape(server.url)  # served, and reachable where it says
    port = _free_port()
    with MetricsExporter("e").serve(parse_endpoint(f"0.0.0.0:{port}")) as server:
        assert server.host == "0.0.0.0"
        assert _scrape(f"http://127.0.0.1:{port}/metrics") is not None


def test_a_port_in_use_is_one_foxhunt_error_naming_it(port_in_use):
    endpoint = parse_endpoint(str(port_in_use))
    expected = f"cannot serve metrics on 127.0.0.1:{port_in_use}: port {port_in_use} is in use by another program"
    with pytest.raises(FoxhuntError, match=re.escape(expected)):
        check_endpoint(endpoint)
    with pytest.raises(FoxhuntError, match=re.escape(expected)):  # the server's own bind, if the port went meanwhile
        MetricsExporter("f").serve(endpoint)
    with pytest.raises(FoxhuntError, match="is not an address of this machine|cannot resolve"):
        check_endpoint(MetricsEndpoint(_free_port(), "192.0.2.1"))  # TEST-NET-1: never this machine's


def test_train_with_a_port_in_use_exits_2_with_one_paragraph_before_loading_data(port_in_use, tmp_path):
    out = tmp_path / "run"
    result = invoke(*train_args(out), "--metrics-port", str(port_in_use))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.stderr.strip().startswith(f"error: cannot serve metrics on 127.0.0.1:{port_in_use}: port")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()  # refused while reading the options: no run folder, no data loaded
    malformed = invoke(*train_args(out), "--metrics-port", "nine-one-hundred")
    assert malformed.exit_code == 2 and "Invalid value for '--metrics-port'" in malformed.stderr


def test_train_help_documents_the_address_form():
    text = " ".join(invoke("train", "--help").output.split())
    assert "--metrics-port [HOST:]PORT" in text
    assert "A PORT alone listens on 127.0.0.1" in text and "0.0.0.0:9100" in text
