"""Options and helpers shared by several commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from foxhunt.config import FoxhuntConfig, load_config
from foxhunt.plugins import FrozenRegistries, PluginHost

__all__ = ["config_options", "resolve_config", "frozen_host", "echo_json", "EXIT_USER_ERROR", "EXIT_STOPPED"]

# Exit codes (docs/reliability.md): 0 finished; 1 an unexpected failure (a traceback: a bug to report);
# EXIT_USER_ERROR for any FoxhuntError (bad input, config, data, checkpoint or folder: one paragraph);
# EXIT_STOPPED for a graceful stop (Ctrl-C, SIGTERM) that wrote a resume checkpoint.
EXIT_USER_ERROR = 2
EXIT_STOPPED = 3


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


def resolve_config(config_path: Path | None, overrides: tuple[str, ...]) -> FoxhuntConfig:
    return load_config(config_path, overrides)


def frozen_host(config: FoxhuntConfig | None = None) -> tuple[PluginHost, FrozenRegistries]:
    """Discover, declare and freeze with the config's plugin selection (raises on any plugin problem)."""
    selection = (config or FoxhuntConfig()).plugins
    host = PluginHost(selection).discover().declare()
    return host, host.freeze()


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))
