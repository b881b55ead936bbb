"""The runtime audit check (invariants 2 and 6): every component of every installed plugin has an audit row.

The pre-commit hook ``audited-components`` finds components statically in the
files of one repository. This check finds them the way a run does: it
discovers every installed plugin (built-in or third-party), declares, freezes,
and asks each plugin's component hooks. Every plugin entry point and every
loss component, gradient combiner, replay augmentation, kernel, monitor and
feature family (``foxhunt_features``) must then have a row in an audit table.

An audit row is a markdown table row whose first cell is the component name in
backticks (the format the hook reads), in a table with this header::

    | component | kind | plugin | status | tests |
    |---|---|---|---|---|
    | `mse` | loss | mse (foxhunt_plugins.losses.mse) | wired | tests/builtin_plugins/losses/test_components.py |

Rows come from two places:

- the tables ``docs/audits/*.md`` of the foxhunt checkout and of the current
  directory (or the folders given explicitly);
- a plugin's own rows: the module (or object) a plugin entry point loads may
  set ``FOXHUNT_AUDIT`` to the markdown text of its audit table. Those rows
  count for that plugin's own entry point and components only, so a
  third-party plugin installed from a wheel carries its audit with it.

Components that a plugin returns only when enabled explicitly (an opt-in loss
such as the Huber example) are found too: the hooks are asked twice, with each
plugin's resolved settings and with every ``enabled`` setting switched on.

The check also reports every ISV slot a kernel writes and nothing reads
(:mod:`foxhunt.tooling.slot_readers`).
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import pkgutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from foxhunt.config import FoxhuntConfig
from foxhunt.dims import DimTable
from foxhunt.errors import PluginError
from foxhunt.plugin.host import ENTRY_POINT_GROUP, PluginHost
from foxhunt.tooling.slot_readers import unread_problem, unread_slots

__all__ = [
    "AUDIT_ATTRIBUTE",
    "KINDS",
    "STATUSES",
    "AuditRow",
    "Component",
    "AuditReport",
    "parse_rows",
    "table_rows",
    "default_audit_dirs",
    "installed_components",
    "check",
    "component_views",
    "switched_on",
    "missing",
    "dim_tables",
    "render_named_dimensions",
    "NAMED_DIMENSIONS_FILE",
]

AUDIT_ATTRIBUTE = "FOXHUNT_AUDIT"  # a plugin module's own audit rows (markdown text)
KINDS = ("plugin", "loss", "combiner", "encoder", "augmentation", "kernel", "monitor", "feature")
STATUSES = ("wired", "partial", "orphan", "out of scope")
HEADER = "| component | kind | plugin | status | tests |\n|---|---|---|---|---|"
STATUS_PLACEHOLDER = "(status)"
TESTS_PLACEHOLDER = "(tests)"


@attrs.frozen
class AuditRow:
    """One row of an audit table; ``source`` is ``file:line`` or ``plugin <name> (FOXHUNT_AUDIT)``."""

    name: str
    kind: str
    plugin: str
    status: str
    tests: str
    source: str

    def problems(self) -> list[str]:
        """What is wrong with the row itself, whatever component it names."""
        found = []
        if self.kind not in KINDS:
            found.append(f"{self.source}: row `{self.name}`: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.status not in STATUSES:
            found.append(
                f"{self.source}: row `{self.name}`: status {self.status!r} is not one of {', '.join(STATUSES)}"
            )
        if self.status in ("wired", "partial") and not self.tests.strip(" -"):
            found.append(f"{self.source}: row `{self.name}`: a {self.status} component names its tests")
        if self.tests.strip() == TESTS_PLACEHOLDER:
            found.append(f"{self.source}: row `{self.name}`: replace {TESTS_PLACEHOLDER} with the tests that cover it")
        return found


@attrs.frozen
class Component:
    """Something that needs an audit row: a plugin entry point or a component one returns."""

    name: str
    kind: str
    plugin: str
    location: str  # module path, for the suggested row
    distribution: str

    def row(self) -> str:
        """The row ``foxhunt audit missing`` suggests (status and tests are for the author to fill in)."""
        where = f"{self.plugin} ({self.location})" if self.location else self.plugin
        return f"| `{self.name}` | {self.kind} | {where} | {STATUS_PLACEHOLDER} | {TESTS_PLACEHOLDER} |"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_rows(text: str, source: str) -> list[AuditRow]:
    """Audit rows of a markdown text: rows of tables headed ``| component | kind | ...`` whose first cell is a
    name in backticks. Other tables (the hot-path audit's, say) are not component rows."""
    rows = []
    header: list[str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            header = None  # a table ends at its first non-table line
            continue
        cells = _cells(line)
        if header is None:
            header = [cell.lower() for cell in cells]
            continue
        first = cells[0]
        if header[0] != "component" or not (len(first) > 2 and first.startswith("`") and first.endswith("`")):
            continue  # the separator, or a row of another kind of table
        cells += [""] * (5 - len(cells))
        name, kind, plugin, status, tests = first.strip("`").strip(), *cells[1:5]
        rows.append(AuditRow(name, kind, plugin, status, tests, f"{source}:{number}"))
    return rows


def table_rows(directories: Iterable[Path]) -> list[AuditRow]:
    """Every audit row of ``*.md`` in ``directories`` (missing folders are skipped)."""
    rows = []
    for directory in directories:
        for table in sorted(Path(directory).glob("*.md")):
            rows += parse_rows(table.read_text(encoding="utf-8"), str(table))
    return rows


def default_audit_dirs() -> list[Path]:
    """``docs/audits`` of the foxhunt checkout this module runs from (when it is one) and of the working directory."""
    candidates = [Path(__file__).resolve().parents[2] / "docs" / "audits", Path.cwd() / "docs" / "audits"]
    found: list[Path] = []
    for candidate in candidates:
        if candidate.is_dir() and candidate.resolve() not in [f.resolve() for f in found]:
            found.append(candidate)
    return found


def component_views(host: PluginHost, config: Any) -> list[tuple[Any, dict[str, Any] | None]]:
    """``(config, settings)`` pairs to ask the component hooks with, so every component shows itself: the run's
    own, every ``enabled`` switch on, and then each other encoder selected (an encoder plugin's monitor, for
    example, exists only in runs that select its encoder)."""
    on = switched_on(host)
    views: list[tuple[Any, dict[str, Any] | None]] = [(config, None), (config, on)]
    try:
        encoders = [item.name for kind, _, item in host.components(config, on) if kind == "encoder"]
    except PluginError:
        return views  # a failing hook is reported by whoever asks these views
    for name in encoders:
        if name != config.learner.encoder:
            views.append((attrs.evolve(config, learner=attrs.evolve(config.learner, encoder=name)), on))
    return views


def switched_on(host: PluginHost) -> dict[str, Any]:
    """Each plugin's settings with its ``enabled`` switch on, where it has one: opt-in components show themselves."""
    return {
        name: attrs.evolve(settings, enabled=True)
        for name, settings in host.all_settings().items()
        if "enabled" in attrs.fields_dict(type(settings))
    }


@attrs.define
class AuditReport:
    """What the check found: components, the rows that cover them, and every problem."""

    components: list[Component] = attrs.Factory(list)
    rows: list[AuditRow] = attrs.Factory(list)
    missing: list[Component] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    frozen: bool = True  # False: the plugins could not be frozen, and that one problem is the whole report

    @property
    def ok(self) -> bool:
        return not self.problems


def installed_components(config: Any = None, host: PluginHost | None = None) -> tuple[list[Component], list[str], PluginHost]:
    """Every plugin entry point and every component of every loaded plugin; plus the problems met on the way.

    ``host`` (a fresh, not yet discovered one) lets a caller choose the plugin
    selection; by default every installed plugin is discovered.
    """
    config = config if config is not None else FoxhuntConfig()
    host = host if host is not None else PluginHost()
    problems: list[str] = []
    if not host.plugins:
        host.discover()
    components = [
        Component(ep.name, "plugin", ep.name, ep.value, ep.dist.name if ep.dist else "(unknown distribution)")
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
        if ep.name in host.plugins  # a caller's own host may hold only some plugins
    ]
    try:
        host.declare()
        host.freeze()
    except PluginError as error:
        # Without a frozen host no component hook can be asked: the plugin problems are the report.
        return components, [f"the plugins cannot be frozen, so their components cannot be listed and no audit row "
                            f"was checked; {error}"], host
    owners: dict[str, tuple[str, str]] = {}
    for view, settings in component_views(host, config):
        try:
            owners.update(host.component_owners(view, settings))
        except PluginError as error:
            problems.append(f"a component hook failed, so its components cannot be listed:\n{error}")
    for name, (kind, plugin) in sorted(owners.items()):
        info = host.plugins[plugin]
        location = getattr(info.module, "__name__", info.location)
        components.append(Component(name, kind, plugin, location, info.distribution))
    return components, problems, host


def _plugin_rows(host: PluginHost) -> dict[str, list[AuditRow]]:
    """``FOXHUNT_AUDIT`` rows of every plugin that ships them, by plugin name."""
    rows: dict[str, list[AuditRow]] = {}
    for name, info in host.plugins.items():
        text = getattr(info.module, AUDIT_ATTRIBUTE, None)
        if isinstance(text, str):
            rows[name] = parse_rows(text, f"plugin {name} ({AUDIT_ATTRIBUTE})")
    return rows


def check(
    audit_dirs: Iterable[Path] | None = None,
    *,
    config: Any = None,
    host: PluginHost | None = None,
    plugins: Sequence[str] = (),
) -> AuditReport:
    """Check that every installed component has a valid audit row.

    ``plugins`` restricts the check to the entry points and components of the
    named plugins (a plugin repository's CI checks its own plugin only).
    """
    directories = list(audit_dirs) if audit_dirs is not None else default_audit_dirs()
    components, problems, host = installed_components(config, host)
    if host.registries is None:
        # No component can be listed, so every row and entry point would be judged against a partial list:
        # the freeze failure (each problem naming plugin, distribution and version) is the whole report.
        return AuditReport(problems=problems, frozen=False)
    if plugins:
        unknown = sorted(set(plugins) - {c.plugin for c in components})
        problems += [f"no installed plugin named {name!r} (see `foxhunt plugins list`)" for name in unknown]
        components = [c for c in components if c.plugin in plugins]
    shared = table_rows(directories)
    own = _plugin_rows(host)
    report = AuditReport(components=components, rows=shared + [r for rows in own.values() for r in rows])
    report.problems += problems
    for row in report.rows:
        report.problems += row.problems()
    for directory in directories:
        report.problems += _stale_test_paths([r for r in shared if r.source.startswith(str(directory))], Path(directory))
    report.problems += _unread_slot_problems(host, config, plugins)
    by_name = {}
    for row in shared:
        by_name.setdefault(row.name, row)
    component_kinds = {c.name: c.kind for c in components if c.kind != "plugin"}
    for component in components:
        row = by_name.get(component.name) or next((r for r in own.get(component.plugin, ()) if r.name == component.name), None)
        if row is None:
            report.missing.append(component)
            what = (
                f"plugin entry point `{component.name}`" if component.kind == "plugin"
                else f"{component.kind} `{component.name}` of plugin {component.plugin!r}"
            )
            report.problems.append(
                f"{what} ({component.distribution}) has no audit row; add one to docs/audits/components.md "
                f"(or to the plugin's {AUDIT_ATTRIBUTE}); `foxhunt audit missing` prints it"
            )
            continue
        # A plugin entry point named like its component shares the component's row.
        expected = component_kinds.get(component.name, component.kind)
        if row.kind != expected and row.kind in KINDS:
            report.problems.append(f"{row.source}: row `{row.name}` says kind {row.kind!r}, but it is a {expected}")
    return report


def _unread_slot_problems(host: PluginHost, config: Any, plugins: Sequence[str]) -> list[str]:
    """Slots a kernel writes and no component or core module reads (of ``plugins`` only, when named)."""
    config = config if config is not None else FoxhuntConfig()
    components = []
    try:
        for view, settings in component_views(host, config):
            components += host.components(view, settings)
    except PluginError:
        return []  # a hook that fails is reported already by installed_components; its readers are unknown
    return [
        unread_problem(use, host.plugins[use.owner])
        for use in unread_slots(host.registries.layout, components)
        if not plugins or use.owner in plugins
    ]


def _stale_test_paths(rows: Sequence[AuditRow], directory: Path) -> list[str]:
    """Test files a table names that do not exist (paths are relative to the repository root above docs/audits)."""
    root = directory.resolve().parents[1]
    problems = []
    for row in rows:
        for item in (part.strip() for part in row.tests.split(",")):
            looks_like_path = "/" in item and " " not in item
            if looks_like_path and not (root / item).exists():
                problems.append(f"{row.source}: row `{row.name}` names {item}, which does not exist; update the row")
    return problems


def missing(audit_dirs: Iterable[Path] | None = None, **options: Any) -> str:
    """The rows still needed, in the table's format (header included); empty when nothing is missing."""
    report = check(audit_dirs, **options)
    if not report.missing:
        return ""
    # One row per name: a plugin entry point named like its component shares the component's row.
    by_name: dict[str, Component] = {}
    for component in report.missing:
        if component.name not in by_name or by_name[component.name].kind == "plugin":
            by_name[component.name] = component
    lines = [HEADER] + [by_name[name].row() for name in sorted(by_name)]
    return "\n".join(lines) + "\n"


# -- the named-dimension reference (docs/audits/named_dimensions.md) ----------------------
NAMED_DIMENSIONS_FILE = "named_dimensions.md"
# Packages whose import is not about tables: the CLI, the test kit (it needs the test extras), the Gymnasium
# adapter (it needs the gym extra; it declares no table of its own) and acting's Triton kernel (it needs Triton,
# which only torch's CUDA builds bring; it declares no table either).
_SKIPPED_PACKAGES = ("foxhunt.cli", "foxhunt.testing", "foxhunt.gym", "foxhunt.learner.fused_q_kernel")


def _own_top_level_packages() -> list[str]:
    """Top-level packages of foxhunt's own distribution (the core and its built-in plugins)."""
    try:
        listed = metadata.distribution("foxhunt").read_text("top_level.txt") or ""
    except metadata.PackageNotFoundError:
        listed = ""
    return sorted(set(listed.split()) | {"foxhunt"})


def _subclasses(base: type) -> list[type]:
    found = []
    for sub in base.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def dim_tables() -> list[type[DimTable]]:
    """Every ``DimTable`` defined in foxhunt's own distribution: all its modules are imported to find them."""
    packages = _own_top_level_packages()
    for top in packages:
        package = importlib.import_module(top)
        for module in pkgutil.walk_packages(package.__path__, f"{top}."):
            if not module.name.startswith(_SKIPPED_PACKAGES):
                importlib.import_module(module.name)
    tables = [t for t in _subclasses(DimTable) if t.__module__.split(".")[0] in packages and t.__members__]
    return sorted(set(tables), key=lambda t: (t.__module__, t.__qualname__))


def render_named_dimensions(registries: Any) -> str:
    """The named-dimension reference: every table in the code, and who declares it to the registry."""
    declared = {id(table): owner for owner, table in registries.dims.values()}
    lines = [
        "# Named dimensions",
        "",
        "Generated by `foxhunt audit dims --write` from the code and the built-in plugin registry",
        "(`registry/dims.toml`); do not edit by hand. Invariant 5: every position in a multi-field",
        "buffer has a name, and a raw number appears only at the table's definition site.",
        "",
        "| table | module | declared by | size |",
        "|---|---|---|---|",
    ]
    tables = dim_tables()
    for table in tables:
        owner = declared.get(id(table))
        by = f"plugin `{owner}` (registry)" if owner else "module-local"
        lines.append(f"| [`{table.__qualname__}`](#{table.__module__.replace('.', '')}{table.__qualname__.lower()}) "
                     f"| `{table.__module__}` | {by} | {table.size()} |")
    for table in tables:
        lines += ["", f"## {table.__module__}.{table.__qualname__}", ""]
        doc = " ".join((table.__doc__ or "").split())
        if doc:
            lines += [doc, ""]
        lines += ["| index | name |", "|---|---|"]
        lines += [f"| {int(member)} | `{member.name}` |" for member in table]
    return "\n".join(lines) + "\n"
