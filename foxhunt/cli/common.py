"""Options and helpers shared by several commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from foxhunt.config import FoxhuntConfig, load_config
from foxhunt.errors import PluginError
from foxhunt.monitoring.metrics_export import MetricsEndpoint, check_endpoint, parse_endpoint
from foxhunt.plugin.host import FrozenRegistries, PluginHost

__all__ = ["toml_string", "config_options", "metrics_port_option", "resolve_config", "frozen_host", "declared_host",
           "echo_json", "EXIT_USER_ERROR", "EXIT_REGRESSED", "EXIT_STOPPED", "EXIT_OUT_OF_BAND"]

# Exit codes (docs/reliability.md): 0 finished; 1 an unexpected failure (a traceback: a bug to report);
# EXIT_USER_ERROR for any FoxhuntError (bad input, config, data, checkpoint or folder: one paragraph);
# EXIT_STOPPED for a graceful stop (Ctrl-C, SIGTERM) that wrote a resume checkpoint; EXIT_OUT_OF_BAND for a run
# stopped by its regression bands (`foxhunt train --bands`, docs/bands.md); EXIT_REGRESSED, the same code, for
# `foxhunt profile --baseline` finding a phase slower than its baseline allows: both mean "a recorded reference
# says this run regressed".
EXIT_USER_ERROR = 2
EXIT_STOPPED = 3
EXIT_OUT_OF_BAND = 4
EXIT_REGRESSED = EXIT_OUT_OF_BAND


def config_options(function):
    """``--config FILE`` and repeatable ``--set KEY=VALUE``."""
    function = click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override one config key, e.g. --set learner.lr=3e-4 (value read as TOML; repeatable).",
    )(function)
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="TOML config file (defaults apply to every key it leaves out).",
    )(function)


class MetricsEndpointType(click.ParamType):
    """``[HOST:]PORT`` -> a :class:`MetricsEndpoint` that can be served now.

    A malformed value is click's usage error; an address that cannot be served (a port in use) is the
    FoxhuntError of :func:`check_endpoint`, one paragraph with exit code 2, raised while the option is read so
    that a run fails before its data is loaded.
    """

    name = "[HOST:]PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> MetricsEndpoint:
        if isinstance(value, MetricsEndpoint):
            return value
        try:
            endpoint = parse_endpoint(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)
        return check_endpoint(endpoint)


def metrics_port_option(function):
    """``--metrics-port [HOST:]PORT``: where the Prometheus endpoint listens (127.0.0.1 unless a host is given)."""
    return click.option(
        "--metrics-port",
        type=MetricsEndpointType(),
        metavar="[HOST:]PORT",
        help="Serve Prometheus metrics at http://HOST:PORT/metrics while training. A PORT alone listens on "
             "127.0.0.1, this machine only; give an address to listen elsewhere: 0.0.0.0:9100 on every "
             "interface (anyone who reaches the machine can read the gauges), [::1]:9100 for IPv6. A port in use "
             "is refused before any data is loaded.",
    )(function)


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string, for building ``--set`` overrides from command options."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def resolve_config(config_path: Path | None, overrides: tuple[str, ...]) -> FoxhuntConfig:
    return load_config(config_path, overrides)


def frozen_host(config: FoxhuntConfig | None = None) -> tuple[PluginHost, FrozenRegistries]:
    """Discover, declare and freeze with the config's plugin selection (raises on any plugin problem)."""
    selection = (config or FoxhuntConfig()).plugins
    host = PluginHost(selection).discover().declare()
    return host, host.freeze()


def declared_host(config: FoxhuntConfig | None = None) -> PluginHost:
    """Discovered, declared and, where it can be, frozen, for listing: a plugin a run would refuse shows ``failed``.

    A freeze failure is not raised: its problems stay on ``host.problems`` and each plugin they name is marked.
    """
    host = PluginHost((config or FoxhuntConfig()).plugins).discover().declare()
    try:
        host.freeze()
    except PluginError:
        pass
    return host


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))
