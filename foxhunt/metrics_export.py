"""Prometheus gauges for the monitors' snapshots, in a private registry per run, served over HTTP.

Gauges (every one labelled ``run`` and ``fold``; ``component`` is the monitor's name):

- ``foxhunt_monitor_value{run, fold, component, key}``: each value of each snapshot;
- ``foxhunt_monitor_fire_rate{run, fold, component}``: how often the device value changed;
- ``foxhunt_health{run, fold}``: learning health (``health.value``);
- ``foxhunt_epoch{run, fold}``: the last epoch exported.

Each run gets its own :class:`~prometheus_client.CollectorRegistry` (never
the global one), so two trainers in one process cannot clobber each other and
a test sees only its own gauges. ``foxhunt train --metrics-port PORT`` serves
it with :meth:`MetricsExporter.serve`; close the returned server at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest, start_http_server

from foxhunt.monitors import DiagSnapshot

__all__ = ["MetricsExporter", "MetricsServer", "start_metrics_server"]


class MetricsServer:
    """A running metrics HTTP server; :meth:`close` stops it and frees the port."""

    def __init__(self, server: Any, thread: Any) -> None:
        self._server = server
        self._thread = thread
        self.host, self.port = server.server_address[:2]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_metrics_server(registry: CollectorRegistry, port: int, addr: str = "127.0.0.1") -> MetricsServer:
    """Serve ``registry`` at ``http://addr:port/metrics`` on a daemon thread (port 0: any free port)."""
    server, thread = start_http_server(port, addr=addr, registry=registry)
    return MetricsServer(server, thread)


class MetricsExporter:
    """Owns one run's registry and gauges; :meth:`update` at every epoch boundary."""

    def __init__(self, run: str, registry: CollectorRegistry | None = None) -> None:
        self.run = str(run)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.value = Gauge(
            "foxhunt_monitor_value", "A value of a monitor's diagnostic snapshot",
            ["run", "fold", "component", "key"], registry=self.registry,
        )
        self.fire_rate = Gauge(
            "foxhunt_monitor_fire_rate", "Fraction of observations at which the monitored device value changed",
            ["run", "fold", "component"], registry=self.registry,
        )
        self.health = Gauge("foxhunt_health", "Learning health in [0, 1]", ["run", "fold"], registry=self.registry)
        self.epoch = Gauge("foxhunt_epoch", "Last epoch exported", ["run", "fold"], registry=self.registry)

    def update(
        self, snapshots: Sequence[DiagSnapshot], *, fold: int, epoch: int | None = None, health: float | None = None
    ) -> None:
        """Set every gauge from ``snapshots`` (labels ``run``, ``fold``, ``component`` = monitor name)."""
        fold_label = str(fold)
        for snapshot in snapshots:
            for key, value in snapshot.values.items():
                self.value.labels(self.run, fold_label, snapshot.name, key).set(value)
            self.fire_rate.labels(self.run, fold_label, snapshot.name).set(snapshot.fire_rate)
        if health is None:
            health = next((s.health for s in snapshots if s.health is not None), None)
        if health is not None:
            self.health.labels(self.run, fold_label).set(health)
        if epoch is not None:
            self.epoch.labels(self.run, fold_label).set(epoch)

    def serve(self, port: int, addr: str = "127.0.0.1") -> MetricsServer:
        """Start the HTTP endpoint for this run's registry; the caller closes the returned server."""
        return start_metrics_server(self.registry, port, addr)

    def text(self) -> str:
        """The exposition text a scrape would return (for logs and tests)."""
        return generate_latest(self.registry).decode("utf-8")
