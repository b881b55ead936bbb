"""Inspection commands: plugins, layout, registry snapshots, config.

Listing and inspection may warn about broken plugins and carry on; only a run
refuses to start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from foxhunt.checkpoint import checkpoint_layout, read_metadata
from foxhunt.cli.common import config_options, declared_host, echo_json, frozen_host, resolve_config
from foxhunt.config import FoxhuntConfig, config_data, dump_config
from foxhunt.config_loading import unstructure
from foxhunt.errors import PluginError
from foxhunt.isv import layout_diff
from foxhunt.plugin.host import PluginHost
from foxhunt.tooling.snapshots import compare_snapshots, write_snapshots

__all__ = ["plugins_group", "layout_group", "registry_group", "config_group"]

console = Console()


def _warn(message: str) -> None:
    click.secho(f"warning: {message}", fg="yellow", err=True)


# -- plugins --------------------------------------------------------------
@click.group("plugins")
def plugins_group() -> None:
    """See which plugins are installed, loaded, disabled or broken."""


@plugins_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="JSON array: name, distribution, version, location, hooks, status, error.")
@config_options
def plugins_list(as_json: bool, config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """List every plugin of the `foxhunt.plugins` entry-point group (built-ins included).

    Status is `loaded`, `disabled` (by [plugins] in the config) or `failed`
    (the error says why: an import or hook that fails, or a declaration a run
    would refuse, such as a duplicate slot or a bad settings table). Broken
    plugins are reported here as warnings; a training run would refuse to start.
    """
    config = resolve_config(config_path, overrides)
    host = declared_host(config)
    for problem in host.problems:
        _warn(str(problem))
    infos = list(host.plugins.values())
    if as_json:
        echo_json([info.to_json() for info in infos])
        return
    table = Table("plugin", "distribution", "version", "status", "hooks", "error", title="foxhunt plugins")
    for info in infos:
        style = {"loaded": "green", "disabled": "dim", "failed": "red"}.get(info.status, "")
        table.add_row(info.name, info.distribution, info.version, f"[{style}]{info.status}[/]", ", ".join(info.hooks),
                      escape(info.error))
    console.print(table)



@plugins_group.command("inspect")
@click.argument("name")
@config_options
def plugins_inspect(name: str, config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Show one plugin: where it comes from, its hooks, and everything it declared.

    NAME is the entry-point name shown by `foxhunt plugins list`.
    """
    config = resolve_config(config_path, overrides)
    host = declared_host(config)
    info = host.plugins.get(name)
    if info is None:
        raise click.BadParameter(f"no plugin named {name!r}; see `foxhunt plugins list`", param_hint="NAME")
    console.print(f"[bold]{info.name}[/]  {info.distribution} {info.version}  ({info.status})")
    console.print(f"  location: {info.location}")
    console.print(f"  hooks: {', '.join(info.hooks) or '-'}")
    if info.error:
        console.print(f"  [red]error:[/] {escape(info.error)}")
    _print_settings(name, host.settings(name) if info.status in ("loaded", "failed") else None)
    if host.registries is None:
        _warn(str(PluginError(host.problems)))
        return
    registries = host.registries
    slots = [s for s in registries.layout.slots if s.owner == name]
    entries = [e for e in registries.state.entries() if e.owner == name]
    tables = [t for t, (owner, _) in registries.dims.items() if owner == name]
    console.print(f"  ISV slots ({len(slots)}):")
    for slot in slots:
        console.print(f"    {slot.name} width={slot.width} offset={registries.layout.offset(slot.name)} init={slot.init}  {slot.doc}")
    console.print(f"  state entries ({len(entries)}):")
    for entry in entries:
        console.print(f"    {entry.name} \\[{entry.category}] {entry.doc}")
    console.print(f"  dimension tables: {', '.join(tables) or '-'}")
    host.start()
    owners = host.component_owners(config)
    components = sorted((kind, comp) for comp, (kind, owner) in owners.items() if owner == name)
    console.print(f"  components: {', '.join(f'{comp} ({kind})' for kind, comp in components) or '-'}")


def _print_settings(name: str, settings: Any) -> None:
    """``settings [plugins.NAME]:`` and one ``key = value`` line each (TOML values), a changed default beside it."""
    if settings is None:
        console.print("  settings: -")
        return
    try:
        defaults = unstructure(type(settings)())
    except (TypeError, ValueError):  # a setting without a default: nothing to compare it with
        defaults = {}
    console.print(f"  settings \\[plugins.{name}]:")
    for key, value in unstructure(settings).items():
        note = f"  (default {json.dumps(defaults[key])})" if key in defaults and defaults[key] != value else ""
        console.print(f"    {key} = {json.dumps(value)}{note}", markup=False, highlight=False)


# -- layout ---------------------------------------------------------------
@click.group("layout")
def layout_group() -> None:
    """The ISV layout: named slots, offsets, owners and the 64-bit fingerprint."""


@layout_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="JSON object: fingerprint (16 hex digits), size, slots[].")
@config_options
def layout_show(as_json: bool, config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Show the composed ISV layout of the plugins this config selects.

    Slots are ordered by name (so plugin order never changes the layout); the
    last two float32 lanes hold the FNV-1a fingerprint bit-exact.
    """
    config = resolve_config(config_path, overrides)
    _, registries = frozen_host(config)
    layout = registries.layout
    if as_json:
        echo_json({"fingerprint": layout.fingerprint_hex, "size": layout.size, "slots": layout.to_records()})
        return
    table = Table("offset", "slot", "width", "owner", "init", "description", title=f"ISV layout {layout.fingerprint_hex}")
    for record in layout.to_records():
        table.add_row(str(record["offset"]), record["name"], str(record["width"]), record["owner"], f"{record['init']:g}", record["doc"])
    console.print(table)


@layout_group.command("diff")
@click.argument("checkpoint", type=click.Path(exists=True, path_type=Path))
@config_options
def layout_diff_command(checkpoint: Path, config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Compare a checkpoint's ISV layout with the current one (exit 1 if they differ).

    CHECKPOINT is a checkpoint directory (or its metadata.json). A differing
    fingerprint means the checkpoint cannot be loaded: there is no migration.
    """
    config = resolve_config(config_path, overrides)
    _, registries = frozen_host(config)
    saved, claimed = checkpoint_layout(read_metadata(checkpoint), str(checkpoint))
    current = registries.layout
    click.echo(f"checkpoint fingerprint {claimed:016x}, current {current.fingerprint_hex}")
    if claimed == current.fingerprint and saved.fingerprint == current.fingerprint:
        click.echo("layouts match")
        return
    click.echo(layout_diff(saved, current))
    raise SystemExit(1)


# -- registry -------------------------------------------------------------
@click.group("registry")
def registry_group() -> None:
    """Committed snapshots (registry/) of the built-in plugin set: layout, state-reset table, dimension tables."""


_dir_option = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("registry"),
    show_default=True, help="Snapshot directory (the repository's registry/).",
)


@registry_group.command("check")
@_dir_option
def registry_check(directory: Path) -> None:
    """Exit 0 if registry/ matches the code, else print a diff and exit 1.

    Only plugins from foxhunt's own distribution count, so installing a
    third-party plugin never changes the snapshots.
    """
    host = PluginHost.builtin().discover().declare()
    diff = compare_snapshots(host.freeze(), directory)
    if diff:
        click.echo(diff)
        click.secho("registry snapshots are out of date: review the diff, then run `foxhunt registry lock`", fg="red", err=True)
        raise SystemExit(1)
    click.echo(f"registry snapshots in {directory} match the code")


@registry_group.command("lock")
@_dir_option
def registry_lock(directory: Path) -> None:
    """Regenerate registry/ from the built-in plugin set (commit the result)."""
    host = PluginHost.builtin().discover().declare()
    for path in write_snapshots(host.freeze(), directory):
        click.echo(f"wrote {path}")


# -- config ---------------------------------------------------------------
@click.group("config")
def config_group() -> None:
    """Resolve and show configuration."""


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of TOML.")
@config_options
def config_show(as_json: bool, config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Print the fully resolved config: defaults, then --config FILE, then each --set.

    Every loaded plugin's settings are shown under [plugins.NAME], resolved, with
    their defaults; a bad plugin table stops the command like a run.
    """
    config: FoxhuntConfig = resolve_config(config_path, overrides)
    host, _ = frozen_host(config)
    settings = host.all_settings()
    if as_json:
        echo_json(config_data(config, settings))
    else:
        click.echo(dump_config(config, settings), nl=False)

