"""Prometheus gauges for the monitors' snapshots, in a private registry per run, served over HTTP.

Gauges (every one labelled ``run`` and ``fold``; ``component`` is the monitor's name):

- ``foxhunt_monitor_value{run, fold, component, key}``: each value of each snapshot;
- ``foxhunt_monitor_fire_rate{run, fold, component}``: how often the device value changed;
- ``foxhunt_health{run, fold}``: learning health (``health.value``);
- ``foxhunt_epoch{run, fold}``: the last epoch exported.

Each run gets its own :class:`~prometheus_client.CollectorRegistry` (never
the global one), so two trainers in one process cannot clobber each other and
a test sees only its own gauges. ``foxhunt train --metrics-port [HOST:]PORT``
serves it with :meth:`MetricsExporter.serve`; close the returned server at the end.

The server listens on 127.0.0.1 unless a host is given (:class:`MetricsEndpoint`,
:func:`parse_endpoint`): the gauges describe a run, and a training machine
should not show them to its network by default. An address that cannot be
served (a port in use, a privileged port, a host that is not this machine's) is
one :class:`~foxhunt.errors.FoxhuntError` naming it, from :func:`check_endpoint`
(the CLI calls it while reading the option, before any data is loaded) and from
:func:`start_metrics_server` itself.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
from typing import Any

import attrs
from prometheus_client import CollectorRegistry, Gauge, generate_latest, start_http_server

from foxhunt.errors import FoxhuntError
from foxhunt.monitoring.monitors import DiagSnapshot

__all__ = [
    "DEFAULT_METRICS_HOST",
    "MetricsEndpoint",
    "parse_endpoint",
    "check_endpoint",
    "MetricsExporter",
    "MetricsServer",
    "start_metrics_server",
]

DEFAULT_METRICS_HOST = "127.0.0.1"


@attrs.frozen
class MetricsEndpoint:
    """Where the metrics server listens: ``host`` (an address or name of this machine) and ``port``."""

    port: int
    host: str = DEFAULT_METRICS_HOST

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> MetricsEndpoint:
    """``"9100"`` (on 127.0.0.1), ``"0.0.0.0:9100"``, ``"localhost:9100"`` or ``"[::1]:9100"``; ValueError otherwise."""
    text = text.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = DEFAULT_METRICS_HOST, text
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host or not host:
        raise ValueError(f"{text!r} is not [HOST:]PORT; write an IPv6 address in brackets, e.g. [::1]:9100")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535, e.g. 9100 or 0.0.0.0:9100")
    return MetricsEndpoint(int(port_text), host)


def _serving_error(endpoint: MetricsEndpoint, error: OSError) -> FoxhuntError:
    if isinstance(error, socket.gaierror):
        reason = f"{endpoint.host!r} is not an address or host name this machine can resolve"
    elif error.errno == errno.EADDRINUSE:
        reason = (f"port {endpoint.port} is in use by another program (another `foxhunt train --metrics-port`?); "
                  "choose another port")
    elif error.errno == errno.EADDRNOTAVAIL:
        reason = f"{endpoint.host} is not an address of this machine; use 127.0.0.1, 0.0.0.0 or one of its addresses"
    elif error.errno == errno.EACCES:
        reason = f"port {endpoint.port} needs privileges this process lacks; use a port above 1023"
    else:
        reason = error.strerror or str(error)
    return FoxhuntError(f"cannot serve metrics on {endpoint}: {reason} (--metrics-port)")


def check_endpoint(endpoint: MetricsEndpoint) -> MetricsEndpoint:
    """``endpoint`` when it can be served now, else the FoxhuntError :func:`start_metrics_server` would raise.

    Binds and releases a socket the way the server will (address reuse on, as ``http.server`` sets it, so a
    port left in TIME_WAIT by a previous run is not refused): a run fails in a moment instead of after its
    data and network are built. The port can still be taken in between; the server's own bind says so then.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            endpoint.host, endpoint.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        raise _serving_error(endpoint, error) from None
    return endpoint


class MetricsServer:
    """A running metrics HTTP server; :meth:`close` stops it and frees the port."""

    def __init__(self, server: Any, thread: Any) -> None:
        self._server = server
        self._thread = thread
        self.host, self.port = server.server_address[:2]

    @property
    def url(self) -> str:
        return f"http://{MetricsEndpoint(self.port, self.host)}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_metrics_server(registry: CollectorRegistry, port: int, addr: str = DEFAULT_METRICS_HOST) -> MetricsServer:
    """Serve ``registry`` at ``http://addr:port/metrics`` on a daemon thread (port 0: any free port).

    An address that cannot be served is a FoxhuntError naming it (see :func:`check_endpoint`).
    """
    try:
        server, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as error:
        raise _serving_error(MetricsEndpoint(port, addr), error) from None
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

    def serve(self, port: int | MetricsEndpoint, addr: str = DEFAULT_METRICS_HOST) -> MetricsServer:
        """Start the HTTP endpoint for this run's registry; the caller closes the returned server.

        ``port`` is a port on ``addr``, or a :class:`MetricsEndpoint` (host and port, as ``--metrics-port`` gives).
        """
        if isinstance(port, MetricsEndpoint):
            port, addr = port.port, port.host
        return start_metrics_server(self.registry, port, addr)

    def text(self) -> str:
        """The exposition text a scrape would return (for logs and tests)."""
        return generate_latest(self.registry).decode("utf-8")
