"""The plugin manager: discovery, validation, declaration and settings, freeze, and the component hooks.

One :class:`PluginHost` per trainer (never a module global). Its lifecycle is
``discovering -> declaring -> frozen -> running -> closed``; calls out of order
raise :class:`~foxhunt.errors.LifecycleError`. Loading and declaring are one
transaction: every problem of every plugin is collected and raised together as
one :class:`~foxhunt.errors.PluginError` at :meth:`PluginHost.freeze`.
"""

from __future__ import annotations

import difflib
import enum
import importlib
import importlib.metadata as metadata
import inspect
from typing import Any

import attrs
import pluggy
import structlog
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from foxhunt import __version__, contract
from foxhunt.errors import LifecycleError, PluginError, PluginProblem
from foxhunt.isv import FINGERPRINT_SLOT, IsvLayout
from foxhunt.monitoring.monitors import AdaptiveMonitor
from foxhunt.plugin import core_declarations
from foxhunt.plugin import spec as hookspecs
from foxhunt.plugin.settings import PluginSelection
from foxhunt.plugin.records import Encoder, GradientCombiner, Kernel, LossComponent, ReplayAugmentation
from foxhunt.plugin.registrar import Declarations, Registrar
from foxhunt.state import ResetCategory, StateEntry, StateRegistry

__all__ = ["ENTRY_POINT_GROUP", "Phase", "PluginInfo", "PluginSelection", "PluginHost", "FrozenRegistries",
           "config_feature_table"]

ENTRY_POINT_GROUP = "foxhunt.plugins"
LEARNER_PLUGIN_NAME = "foxhunt.learner"  # the learner's state entries, declared as part of the core
# The core's own plugins, registered by module name before any entry point (as pytest registers its built-ins
# from a list of names): the host names the subsystems that declare state, and imports none of them itself.
CORE_PLUGINS: tuple[tuple[str, str], ...] = (
    (core_declarations.CORE_PLUGIN_NAME, "foxhunt.plugin.core_declarations"),
    (LEARNER_PLUGIN_NAME, "foxhunt.learner.declarations"),
)
CORE_PLUGIN_NAMES = tuple(name for name, _ in CORE_PLUGINS)
HOOK_NAMES = tuple(name for name in dir(hookspecs) if name.startswith("foxhunt_"))
log = structlog.get_logger(__name__)


class Phase(enum.StrEnum):
    DISCOVERING = "discovering"
    DECLARING = "declaring"
    FROZEN = "frozen"
    RUNNING = "running"
    CLOSED = "closed"


@attrs.define
class PluginInfo:
    """What the host knows about one plugin (shown by ``foxhunt plugins list``)."""

    name: str
    distribution: str
    version: str
    location: str
    status: str = "discovered"  # loaded | disabled | failed
    hooks: list[str] = attrs.Factory(list)
    error: str = ""
    module: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "location": self.location,
            "hooks": list(self.hooks),
            "status": self.status,
            "error": self.error,
        }


def _call(impl: Any, **arguments: Any) -> Any:
    """Call a hookimpl directly with the spec arguments it names (pluggy lets an impl take a subset)."""
    return impl.function(**{name: arguments[name] for name in impl.argnames})


@attrs.frozen
class FrozenRegistries:
    """The three composed registries, fixed at freeze."""

    layout: IsvLayout
    state: StateRegistry
    dims: dict[str, tuple[str, type]]


class PluginHost:
    """Owns one ``pluggy.PluginManager("foxhunt")`` and walks it through the lifecycle."""

    def __init__(self, selection: PluginSelection | None = None) -> None:
        self.selection = selection or PluginSelection()
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.phase = Phase.DISCOVERING
        self.plugins: dict[str, PluginInfo] = {}
        self.problems: list[PluginProblem] = []
        self.declarations = Declarations(sections=dict(self.selection.settings),
                                         profile_sections=dict(self.selection.profile_settings))
        self.registries: FrozenRegistries | None = None
        self.kernel_owners: dict[str, str] = {}  # kernel name -> plugin, filled by kernels()

    # -- lifecycle --------------------------------------------------------
    def _expect(self, *phases: Phase, action: str) -> None:
        if self.phase not in phases:
            wanted = " or ".join(str(p) for p in phases)
            raise LifecycleError(f"cannot {action} while the plugin host is {self.phase}; it must be {wanted}")

    def _named(self, plugin: str) -> str:
        """A plugin by name with its distribution and version: the other side of a clash, for the user to find."""
        info = self.plugins.get(plugin)
        return repr(plugin) if info is None else f"{plugin!r} (from {info.distribution} {info.version})"

    def _problem(self, info: PluginInfo, message: str) -> None:
        self.problems.append(PluginProblem(info.name, info.distribution, info.version, message))

    # -- discovery --------------------------------------------------------
    def discover(self) -> PluginHost:
        """Load every plugin of the ``foxhunt.plugins`` entry-point group that the selection enables."""
        self._expect(Phase.DISCOVERING, action="discover plugins")
        self.add_core()
        for entry_point in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
            dist = entry_point.dist
            info = PluginInfo(
                name=entry_point.name,
                distribution=dist.name if dist else "(unknown distribution)",
                version=dist.version if dist else "0",
                location=entry_point.value,
            )
            if entry_point.name in self.plugins:
                self._problem(info, f"plugin name {entry_point.name!r} is provided by two entry points")
                continue
            self.plugins[info.name] = info
            if not self.selection.selects(info.name):
                info.status = "disabled"
                continue
            try:
                module = entry_point.load()
            except Exception as error:  # any import failure is reported, not raised one by one
                info.status = "failed"
                info.error = f"import of {entry_point.value!r} failed: {type(error).__name__}: {error}"
                self._problem(info, info.error + " (fix the import or disable the plugin)")
                continue
            self._register(info, module)
        self._check_required()
        return self

    @classmethod
    def builtin(cls) -> PluginHost:
        """A host that loads only the plugins shipped in foxhunt's own distribution (for registry snapshots)."""
        names = [
            ep.name
            for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
            if ep.dist is not None and ep.dist.name == "foxhunt"
        ]
        return cls(PluginSelection(only=names or (core_declarations.CORE_PLUGIN_NAME,)))

    def add_core(self) -> None:
        """Register the core's own declarations (:data:`CORE_PLUGINS`: the trainer's and the learner's);
        ``discover`` does this first."""
        for name, module in CORE_PLUGINS:
            self.add_plugin(importlib.import_module(module), name, distribution="foxhunt", version=__version__)

    def add_plugin(self, plugin: Any, name: str, *, distribution: str = "(in-process)", version: str = "0") -> None:
        """Register a plugin object directly (tests, the authoring kit, the core's own declarations)."""
        self._expect(Phase.DISCOVERING, action="add a plugin")
        info = PluginInfo(name, distribution, version, getattr(plugin, "__name__", repr(plugin)))
        if name in self.plugins:
            self._problem(info, f"plugin name {name!r} is registered twice")
            return
        self.plugins[name] = info
        self._register(info, plugin)

    def _register(self, info: PluginInfo, module: Any) -> None:
        info.module = module
        try:
            location = inspect.getsourcefile(module) if inspect.ismodule(module) else None
        except TypeError:  # a module built in memory (types.ModuleType) has no source file
            location = None
        if location:
            info.location = location
        unknown = self._unknown_hooks(module)
        for hook_name in unknown:
            close = difflib.get_close_matches(hook_name, HOOK_NAMES, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known hooks: {', '.join(HOOK_NAMES)}"
            self._problem(info, f"unknown hook {hook_name!r}: no such hookspec ({hint})")
        unmarked = self._unmarked_hooks(module)
        for hook_name in unmarked:
            self._problem(info, f"{hook_name!r} is not marked as a hook implementation, so pluggy would skip it "
                                "silently; decorate it with @foxhunt.hookimpl")
        if unknown or unmarked:
            info.status = "failed"
            info.error = "; ".join(filter(None, [
                f"unknown hook(s): {', '.join(unknown)}" if unknown else "",
                f"hook(s) without @hookimpl: {', '.join(unmarked)}" if unmarked else "",
            ]))
            return
        try:
            self.pm.register(module, name=info.name)
        except pluggy.PluginValidationError as error:
            info.status = "failed"
            info.error = str(error)
            self._problem(info, f"hook signature rejected: {error}")
            return
        info.status = "loaded"
        info.hooks = sorted(impl.name for impl in self.pm.get_hookcallers(module) or ())

    def _unknown_hooks(self, module: Any) -> list[str]:
        """Functions that match no hookspec: any ``foxhunt_*`` one, and any marked ``@hookimpl`` whatever its name
        (a typo in the prefix would otherwise reach pluggy's check as a traceback from every command)."""
        unknown = []
        for attr_name in dir(module):
            if attr_name in HOOK_NAMES:
                continue
            named_like_a_hook = attr_name.startswith("foxhunt_") and callable(getattr(module, attr_name, None))
            if named_like_a_hook or self.pm.parse_hookimpl_opts(module, attr_name) is not None:
                unknown.append(attr_name)
        return unknown

    def _unmarked_hooks(self, module: Any) -> list[str]:
        """Functions named exactly like a hook but not marked ``@hookimpl``: pluggy registers nothing for them."""
        return [name for name in HOOK_NAMES
                if callable(getattr(module, name, None)) and self.pm.parse_hookimpl_opts(module, name) is None]

    def _check_required(self) -> None:
        for name, spec in self.selection.require.items():
            info = self.plugins.get(name)
            if info is None:
                self.problems.append(
                    PluginProblem(name, "(not installed)", "-", f"required plugin {name!r} ({spec}) is not installed")
                )
                continue
            try:
                version_ok = Version(info.version) in SpecifierSet(spec)
            except InvalidVersion:
                version_ok = False
            if not version_ok:
                self._problem(info, f"config requires {name} {spec} but version {info.version} is installed")

    # -- declaring and freezing -------------------------------------------
    def declare(self) -> PluginHost:
        """Run every loaded plugin's ``foxhunt_declare`` with its own registrar."""
        self._expect(Phase.DISCOVERING, action="declare")
        self.pm.check_pending()
        self.phase = Phase.DECLARING
        for impl in self.pm.hook.foxhunt_declare.get_hookimpls():
            info = self.plugins[impl.plugin_name]
            registrar = Registrar(info.name, self.declarations)
            try:
                _call(impl, registrar=registrar)
            except Exception as error:  # collected with the rest
                self._problem(info, f"foxhunt_declare raised {type(error).__name__}: {error}")
        return self

    def freeze(self) -> FrozenRegistries:
        """Compose the registries, check invariant 1, and raise every problem found so far together."""
        self._expect(Phase.DECLARING, action="freeze")
        self.declarations.frozen = True
        owner_info = {name: info for name, info in self.plugins.items()}
        for owner, message in self.declarations.problems:
            self._problem(owner_info[owner], message)
        slot_owner: dict[str, str] = {}
        for slot in self.declarations.slots:
            if slot.name == FINGERPRINT_SLOT:
                self._problem(owner_info[slot.owner], f"ISV slot name {slot.name!r} is reserved for the layout fingerprint")
                continue
            if slot.name in slot_owner:
                self._clash("ISV slot", slot.name, slot_owner[slot.name], slot.owner, "; choose another name")
                continue
            slot_owner[slot.name] = slot.owner
        entries = self._state_entries(slot_owner, owner_info)
        self._check_sections()
        if self.problems:
            self._mark_failed()
            raise PluginError(self.problems)
        unique_slots = {slot.name: slot for slot in self.declarations.slots}
        layout = IsvLayout.compose(unique_slots.values())
        self.registries = FrozenRegistries(layout, StateRegistry(entries), dict(self.declarations.dims))
        self.phase = Phase.FROZEN
        log.debug("plugins frozen", plugins=len(self.plugins), slots=len(layout.slots), fingerprint=layout.fingerprint_hex)
        return self.registries

    def _clash(self, what: str, name: str, first: str, later: str, advice: str) -> None:
        """Two plugins claim one name: each is told, with the other's distribution and version, whatever order
        they declared in (the core's own names are fixed, so the core is never the one told to rename)."""
        self._problem(self.plugins[later], f"{what} {name!r} is already declared by plugin {self._named(first)}{advice}")
        if first != later and first not in CORE_PLUGIN_NAMES:
            self._problem(self.plugins[first], f"{what} {name!r} is also declared by plugin {self._named(later)}; "
                                               "rename it in one of the two, or disable one of them in [plugins]")

    def _mark_failed(self) -> None:
        """Every loaded plugin with a problem is ``failed``, its problems as its error (``foxhunt plugins list``)."""
        messages: dict[str, list[str]] = {}
        for problem in self.problems:
            info = self.plugins.get(problem.plugin)
            if info is not None and info.status == "loaded":  # one that failed to load has its error already
                messages.setdefault(info.name, []).append(problem.message)
        for name, found in messages.items():
            self.plugins[name].status = "failed"
            self.plugins[name].error = "; ".join(found)

    def _state_entries(self, slot_owner: dict[str, str], owner_info: dict[str, PluginInfo]) -> list[StateEntry]:
        entries: dict[str, StateEntry] = {}
        for entry in self.declarations.states:
            info = owner_info[entry.owner]
            if entry.name in entries:
                self._clash("state entry", entry.name, entries[entry.name].owner, entry.owner, "")
                continue
            if entry.name in slot_owner:
                if slot_owner[entry.name] != entry.owner:
                    self._problem(info, f"state entry {entry.name!r} resets a slot owned by {slot_owner[entry.name]!r}")
                    continue
                entry = attrs.evolve(entry, is_isv_slot=True)
            elif entry.category in (ResetCategory.FOLD_RESET, ResetCategory.WINDOW_RESET, ResetCategory.SOFT_RESET):
                if entry.reset is None:
                    self._problem(
                        info,
                        f"state entry {entry.name!r} ({entry.category}) has no reset dispatch; pass reset=callable",
                    )
            entries[entry.name] = entry
        # The fingerprint lanes are fixed by the layout itself: never reset, checked on every load.
        entries[FINGERPRINT_SLOT] = StateEntry(
            FINGERPRINT_SLOT, core_declarations.CORE_PLUGIN_NAME, ResetCategory.SCHEMA_CONTRACT,
            doc="64-bit FNV-1a layout fingerprint (two float32 lanes, bit-exact)", is_isv_slot=True,
        )
        for name, owner in slot_owner.items():
            if name not in entries:
                self._problem(
                    owner_info[owner],
                    f"ISV slot {name!r} has no state-reset entry; add registrar.state({name!r}, '<category>')",
                )
        return list(entries.values())

    def _check_sections(self) -> None:
        """Every ``[plugins.<name>]`` table must belong to a loaded plugin that declared settings."""
        loaded = sorted(name for name, info in self.plugins.items() if info.status == "loaded")
        for name in sorted(self.declarations.sections):
            if name in self.declarations.settings:
                continue
            info = self.plugins.get(name)
            if info is None:
                close = difflib.get_close_matches(name, list(self.plugins), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                self.problems.append(PluginProblem(
                    name, "(not installed)", "-",
                    f"[plugins.{name}] configures a plugin that is not loaded: no plugin named {name!r} is installed "
                    f"(loaded plugins: {', '.join(loaded)}); {hint}correct the name or remove the section",
                ))
            elif info.status == "disabled":
                why, fix = ("[plugins] disable names it", "take it out of disable") if name in self.selection.disable \
                    else ("[plugins] only does not name it", "add it to only")
                self._problem(info, f"[plugins.{name}] configures a plugin that is not loaded: {why} "
                                    f"(loaded plugins: {', '.join(loaded)}); {fix} or remove the section")
            elif info.status == "loaded":
                self._problem(info, f"[plugins.{name}] sets keys, but plugin {name!r} declares no settings "
                                    "(it never calls registrar.settings); remove the section")
            # a plugin that failed to load already has its problem: its settings were never declared

    def settings(self, name: str) -> Any:
        """Plugin ``name``'s resolved settings (an instance of the class it declared), or ``None``."""
        self._expect(Phase.DECLARING, Phase.FROZEN, Phase.RUNNING, action="read plugin settings")
        return self.declarations.settings.get(name)

    def all_settings(self) -> dict[str, Any]:
        """``{plugin: resolved settings}`` for every loaded plugin that declared settings, by name."""
        self._expect(Phase.DECLARING, Phase.FROZEN, Phase.RUNNING, action="read plugin settings")
        return {name: self.declarations.settings[name] for name in sorted(self.declarations.settings)
                if self.declarations.settings[name] is not None}

    # -- components -------------------------------------------------------
    def _collect(self, hook_name: str, record_type: type | None, config: Any,
                 settings: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
        self._expect(Phase.FROZEN, Phase.RUNNING, action=f"call {hook_name}")
        settings = {**self.declarations.settings, **(settings or {})}
        results: list[tuple[str, Any]] = []
        problems: list[PluginProblem] = []
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            info = self.plugins[impl.plugin_name]
            try:
                returned = _call(impl, config=config, settings=settings.get(info.name))
            except Exception as error:
                problems.append(PluginProblem(info.name, info.distribution, info.version, f"{hook_name} raised {error!r}"))
                continue
            for item in returned or ():
                if record_type is not None and not isinstance(item, record_type):
                    problems.append(
                        PluginProblem(
                            info.name, info.distribution, info.version,
                            f"{hook_name} returned {type(item).__name__}, expected {record_type.__name__}",
                        )
                    )
                    continue
                results.append((info.name, item))
        seen: dict[str, str] = {}
        for owner, item in results:
            if item.name in seen:
                info = self.plugins[owner]
                problems.append(
                    PluginProblem(
                        info.name, info.distribution, info.version,
                        f"component name {item.name!r} from {hook_name} is already used by plugin "
                        f"{self._named(seen[item.name])}",
                    )
                )
            seen.setdefault(item.name, owner)
        if problems:
            raise PluginError(problems)
        return results

    def _unprovided_reads(self, collected: list[tuple[str, Any]], what: str) -> list[PluginProblem]:
        """A read of a name nobody provides: no loaded plugin declares that slot and the core has no such signal.

        Without this check a misspelt or unloaded name fails deep inside a kernel's first launch, or never: a
        kernel with a default for a missing slot would silently use it. A name in ``optional_reads`` may be
        missing (the component has its fallback).
        """
        provided = set(self.registries.layout.offsets) | {signal.name for signal in contract.SIGNALS}
        problems = []
        for owner, item in collected:
            optional = set(getattr(item, "optional_reads", ()))
            for name in (*item.reads, *getattr(item, "signals", ())):
                if name in provided or name in optional:
                    continue
                close = difflib.get_close_matches(name, sorted(provided), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                info = self.plugins[owner]
                problems.append(PluginProblem(
                    info.name, info.distribution, info.version,
                    f"{what} {item.name!r} reads {name!r}, but no loaded plugin declares that ISV slot and the core "
                    f"provides no such signal (foxhunt.contract lists the shared names); {hint}load the plugin that "
                    f"declares it (it may be disabled in [plugins]), correct the name, or, if the {what} works "
                    f"without it, add it to optional_reads",
                ))
        return problems

    def loss_components(self, config: Any) -> list[LossComponent]:
        collected = self._collect("foxhunt_loss_components", LossComponent, config)
        problems = self._unprovided_reads(collected, "loss component")
        if problems:
            raise PluginError(problems)
        return [item for _, item in collected]

    def gradient_combiners(self, config: Any) -> list[GradientCombiner]:
        """Every gradient combiner of the loaded plugins (the core's ``budgeted_sum`` among them when the core
        is registered); ``[learner] combiner`` picks one (:func:`foxhunt.learner.select_combiner`)."""
        return [item for _, item in self._collect("foxhunt_gradient_combiners", GradientCombiner, config)]

    def encoders(self, config: Any) -> list[Encoder]:
        """Every encoder of the loaded plugins (the core's ``mlp`` among them when the core is registered);
        ``[learner] encoder`` picks one (:func:`foxhunt.learner.select_encoder`)."""
        collected = self._collect("foxhunt_encoders", Encoder, config)
        problems = self._undeclared_writes(collected, "encoder")
        if problems:
            raise PluginError(problems)
        return [item for _, item in collected]

    def replay_augmentations(self, config: Any) -> list[ReplayAugmentation]:
        """Every replay augmentation the loaded plugins switch on, in the order the replay applies them (by name)."""
        collected = self._collect("foxhunt_replay_augmentations", ReplayAugmentation, config)
        return sorted((item for _, item in collected), key=lambda item: item.name)

    def feature_table(self, config: Any) -> Any:
        """The run's :class:`foxhunt.features.FeatureTable`: the core's feature families and sets plus every
        loaded plugin's (``foxhunt_features``, ``foxhunt_feature_sets``); a name the core or another plugin
        already has stops the run, naming both."""
        from foxhunt.features import FeatureDef, FeatureSet, FeatureTable  # numba and the data layer: load on use

        families = self._collect("foxhunt_features", FeatureDef, config)
        sets = self._collect("foxhunt_feature_sets", FeatureSet, config)
        table, found = FeatureTable.compose(families, sets)
        if found:
            raise PluginError([PluginProblem(plugin, self.plugins[plugin].distribution, self.plugins[plugin].version,
                                             message) for plugin, message in found])
        return table

    def kernels(self, config: Any) -> list[Kernel]:
        collected = self._collect("foxhunt_kernels", Kernel, config)
        problems = self._unprovided_reads(collected, "kernel") + self._undeclared_writes(collected, "kernel")
        if problems:
            raise PluginError(problems)
        self.kernel_owners = {kernel.name: owner for owner, kernel in collected}
        return [kernel for _, kernel in collected]

    def _undeclared_writes(self, collected: list[tuple[str, Any]], kind: str) -> list[PluginProblem]:
        """A problem for each slot a record ``writes`` that its own plugin did not declare."""
        layout = self.registries.layout
        problems = []
        for owner, item in collected:
            for slot_name in item.writes:
                if slot_name not in layout.offsets or layout.slot(slot_name).owner != owner:
                    info = self.plugins[owner]
                    problems.append(PluginProblem(
                        info.name, info.distribution, info.version,
                        f"{kind} {item.name!r} writes ISV slot {slot_name!r}, which plugin {owner!r} did not declare",
                    ))
        return problems

    def monitors(self, config: Any) -> list[AdaptiveMonitor]:
        """Every monitor, each refused unless its own plugin declared its statistics entry ``monitor.<name>``."""
        collected = self._collect("foxhunt_monitors", AdaptiveMonitor, config)
        owners = {entry.name: entry.owner for entry in self.registries.state.entries()}
        problems = self._unprovided_reads(collected, "monitor")
        for owner, monitor in collected:
            if owners.get(monitor.state_name) != owner:
                info = self.plugins[owner]
                declared = f"plugin {self._named(owners[monitor.state_name])} declares it" \
                    if monitor.state_name in owners else "no plugin declares it"
                problems.append(PluginProblem(
                    info.name, info.distribution, info.version,
                    f"monitor {monitor.name!r} keeps statistics in the state entry {monitor.state_name!r}, but "
                    f"{declared}; add registrar.state({monitor.state_name!r}, 'fold-reset', "
                    "reset=foxhunt.monitoring.monitors.reset_monitor) to this plugin's foxhunt_declare",
                ))
        if problems:
            raise PluginError(problems)
        return [monitor for _, monitor in collected]

    def component_owners(self, config: Any, settings: dict[str, Any] | None = None) -> dict[str, tuple[str, str]]:
        """``{component name: (kind, plugin)}`` for every component of every loaded plugin (audit check).

        ``settings`` replaces some plugins' resolved settings for this question only (the audit switches
        opt-in plugins on this way).
        """
        return {item.name: (kind, owner) for kind, owner, item in self.components(config, settings)}

    def components(self, config: Any, settings: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
        """``(kind, plugin, record)`` of every loss component, combiner, encoder, augmentation, kernel, monitor and
        feature family,
        unvalidated (the audit's view: it reports what is wrong rather than stopping at it). ``settings`` as for
        :meth:`component_owners`."""
        found = []
        for kind, hook in (("loss", "foxhunt_loss_components"), ("combiner", "foxhunt_gradient_combiners"),
                           ("encoder", "foxhunt_encoders"), ("augmentation", "foxhunt_replay_augmentations"),
                           ("kernel", "foxhunt_kernels"),
                           ("monitor", "foxhunt_monitors"), ("feature", "foxhunt_features")):
            found += [(kind, owner, item) for owner, item in self._collect(hook, None, config, settings)]
        return found

    def start(self) -> None:
        self._expect(Phase.FROZEN, action="start running")
        self.phase = Phase.RUNNING

    def close(self) -> None:
        self.phase = Phase.CLOSED

    def versions(self) -> dict[str, dict[str, str]]:
        """Loaded plugins with distribution and version (recorded in checkpoints)."""
        return {
            name: {"distribution": info.distribution, "version": info.version}
            for name, info in sorted(self.plugins.items())
            if info.status == "loaded"
        }


def config_feature_table(config: Any) -> Any:
    """The feature table a run of ``config`` computes with, for a caller without a host of its own (the gym,
    the memory estimate): the core's when its features are all the core's, else that of ``config``'s plugins."""
    from foxhunt.errors import DataError
    from foxhunt.features import CORE_TABLE

    try:
        config.features.resolve_set(CORE_TABLE)
        return CORE_TABLE
    except DataError:
        pass  # a feature plugin's set or family: ask the plugins
    host = PluginHost(config.plugins).discover().declare()
    host.freeze()
    try:
        return host.feature_table(config)
    finally:
        host.close()
