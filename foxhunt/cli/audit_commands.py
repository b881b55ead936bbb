"""``foxhunt audit``: the runtime audit check, the rows still missing, and the named-dimension reference."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from foxhunt.tooling.audit import NAMED_DIMENSIONS_FILE, check, default_audit_dirs, missing, render_named_dimensions
from foxhunt.cli.common import config_options, resolve_config
from foxhunt.tooling.contract_docs import adaptive_doc_path, builtin_components, render_tables, replace_tables, stale_tables
from foxhunt.plugin.host import PluginHost

__all__ = ["audit_group"]


def _audit_options(function):
    function = click.option(
        "--plugin", "plugins", multiple=True, metavar="NAME",
        help="Only this plugin's entry point and components (repeatable); a plugin repository's CI uses it.",
    )(function)
    function = click.option(
        "--audits", "audit_dirs", multiple=True, type=click.Path(file_okay=False, path_type=Path),
        help="Folder of audit tables (*.md; repeatable). Default: docs/audits of the foxhunt checkout and of the "
        "current directory.",
    )(function)
    return config_options(function)


@click.group("audit")
def audit_group() -> None:
    """Invariants 2 and 6: every component of every installed plugin has an audit row."""


@audit_group.command("check")
@_audit_options
def audit_check(audit_dirs: tuple[Path, ...], plugins: tuple[str, ...], config_path: Path | None,
                overrides: tuple[str, ...]) -> None:
    """Exit 0 when every plugin entry point, loss component, kernel and monitor has a valid row, else 1.

    Plugins are discovered as a run discovers them (built-in and third-party);
    rows come from the audit tables and from each plugin's FOXHUNT_AUDIT text.
    """
    report = check(audit_dirs or None, config=resolve_config(config_path, overrides), plugins=plugins)
    for problem in report.problems:
        click.echo(problem, err=True)
    if not report.frozen:
        click.echo("audit: stopped before any row was checked: fix the plugins above and run again")
        sys.exit(1)
    covered = len({c.name for c in report.components}) - len({c.name for c in report.missing})
    click.echo(f"audit: {covered} of {len({c.name for c in report.components})} components have a row; "
               f"{len(report.problems)} problem(s)")
    sys.exit(0 if report.ok else 1)


@audit_group.command("missing")
@_audit_options
def audit_missing(audit_dirs: tuple[Path, ...], plugins: tuple[str, ...], config_path: Path | None,
                  overrides: tuple[str, ...]) -> None:
    """Print the audit rows still needed, in the table's format, ready to paste into docs/audits/components.md.

    Replace (status) with wired, partial, orphan or out of scope, and (tests)
    with the tests that cover the component; `foxhunt audit check` refuses the
    placeholders.
    """
    rows = missing(audit_dirs or None, config=resolve_config(config_path, overrides), plugins=plugins)
    if rows:
        click.echo(rows, nl=False)
    else:
        click.echo("every component has an audit row", err=True)


@audit_group.command("dims")
@click.option("--write", is_flag=True, help=f"Write docs/audits/{NAMED_DIMENSIONS_FILE} instead of printing it.")
@click.option("--check", "check_only", is_flag=True, help=f"Exit 1 when docs/audits/{NAMED_DIMENSIONS_FILE} is stale.")
def audit_dims(write: bool, check_only: bool) -> None:
    """The named-dimension reference: every DimTable in foxhunt and its built-in plugins."""
    host = PluginHost.builtin().discover().declare()
    text = render_named_dimensions(host.freeze())
    target = (default_audit_dirs() or [Path("docs/audits")])[0] / NAMED_DIMENSIONS_FILE
    if check_only:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            click.echo(f"{target} is stale; regenerate it with `foxhunt audit dims --write`", err=True)
            sys.exit(1)
        click.echo(f"{target} is up to date")
    elif write:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        click.echo(f"wrote {target}")
    else:
        click.echo(text, nl=False)


@audit_group.command("contract")
@click.option("--write", is_flag=True, help="Rewrite the generated tables of docs/adaptive.md instead of printing them.")
@click.option("--check", "check_only", is_flag=True, help="Exit 1 when docs/adaptive.md's generated tables are stale.")
def audit_contract(write: bool, check_only: bool) -> None:
    """docs/adaptive.md's slot and signal tables, generated from foxhunt.contract and the built-in plugins."""
    tables = render_tables(builtin_components())
    target = adaptive_doc_path()
    if check_only:
        stale = stale_tables(target.read_text(encoding="utf-8"), tables)
        if stale:
            click.echo(f"{target}: the {', '.join(stale)} table(s) are stale; regenerate them with "
                       "`foxhunt audit contract --write`", err=True)
            sys.exit(1)
        click.echo(f"{target}: the generated tables are up to date")
    elif write:
        target.write_text(replace_tables(target.read_text(encoding="utf-8"), tables), encoding="utf-8")
        click.echo(f"wrote the {', '.join(tables)} tables of {target}")
    else:
        click.echo("\n\n".join(tables.values()))
