"""``foxhunt``: the command group, global flags and error rendering."""

from __future__ import annotations

import errno
import os
import sys

# The program (not the library) picks numba's CPU thread pool, before anything imports numba:
# OpenMP's pool spins while waiting, and on a machine shared with another busy process a training
# epoch took 4.2 s instead of 1.6 s; numba's own "workqueue" pool took 1.6 s either way.
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")

import click

from foxhunt import __version__
from foxhunt.cli.audit_commands import audit_group
from foxhunt.cli.bands_commands import bands_group
from foxhunt.cli.common import EXIT_USER_ERROR, declared_host
from foxhunt.cli.data_commands import data_group
from foxhunt.cli.export_commands import export_command
from foxhunt.cli.inspect_commands import config_group, layout_group, plugins_group, registry_group
from foxhunt.cli.logs import configure_logging
from foxhunt.cli.profile_commands import profile_command
from foxhunt.cli.sweep_commands import sweep_command
from foxhunt.cli.train_commands import backtest_command, datasets_group, report_command, train_command
from foxhunt.cli.tune_commands import tune_command
from foxhunt.errors import FoxhuntError

__all__ = ["cli", "main"]


def _print_version(verbose: bool) -> None:
    click.echo(f"foxhunt {__version__}")
    if not verbose:
        return
    host = declared_host()  # a plugin a run would refuse, at import or at declaration, shows failed
    for info in host.plugins.values():
        click.echo(f"  {info.name:<20} {info.distribution} {info.version:<10} {info.status:<8} {info.location}")
    for problem in host.problems:
        click.echo(f"  warning: {problem}", err=True)


class FoxhuntGroup(click.Group):
    """Renders foxhunt errors as one paragraph; ``--debug`` re-raises for the traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except FoxhuntError as error:
            if ctx.meta.get("foxhunt.debug"):
                raise
            click.secho(f"error: {error}", fg="red", err=True)
            sys.exit(EXIT_USER_ERROR)
        except OSError as error:
            # The machine refusing a write (a full or read-only disk, a quota, permissions) is not a bug to
            # report with a traceback; any other OSError is.
            if ctx.meta.get("foxhunt.debug") or error.errno not in _STORAGE_ERRORS:
                raise
            where = f" ({error.filename})" if error.filename else ""
            click.secho(
                f"error: the disk refused a file operation{where}: {error.strerror}. Free space or fix the "
                "folder's permissions; a training run keeps the resume checkpoint of its last finished epoch "
                "(continue it with foxhunt train --resume RUN_DIR)", fg="red", err=True,
            )
            sys.exit(EXIT_USER_ERROR)


_STORAGE_ERRORS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EIO})


@click.group(cls=FoxhuntGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", "show_version", is_flag=True, help="Print the version and exit (with -v: every plugin too).")
@click.option("-v", "--verbose", is_flag=True, help="More detail (with --version: plugins, distributions, locations).")
@click.option("--debug", is_flag=True, help="Debug logs, and full tracebacks instead of one-paragraph errors.")
@click.option("--json-logs/--console-logs", default=None, help="Log format (default: console on a terminal, JSON otherwise).")
@click.pass_context
def cli(ctx: click.Context, show_version: bool, verbose: bool, debug: bool, json_logs: bool | None) -> None:
    """foxhunt trains distributional RL trading agents on market data.

    Start with `foxhunt train` (bundled EUR/USD hourly data, a few minutes on a
    laptop CPU). See what is loaded with `foxhunt plugins list` and
    `foxhunt layout show`. Every command has --help.
    """
    ctx.meta["foxhunt.debug"] = debug
    configure_logging(debug=debug, json_logs=json_logs)
    if show_version:
        _print_version(verbose)
        ctx.exit(0)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


cli.add_command(train_command)
cli.add_command(backtest_command)
cli.add_command(export_command)
cli.add_command(report_command)
cli.add_command(tune_command)
cli.add_command(sweep_command)
cli.add_command(bands_group)
cli.add_command(profile_command)
cli.add_command(datasets_group)
cli.add_command(data_group)
cli.add_command(plugins_group)
cli.add_command(layout_group)
cli.add_command(registry_group)
cli.add_command(config_group)
cli.add_command(audit_group)


def main() -> None:
    cli(prog_name="foxhunt")


if __name__ == "__main__":
    main()
