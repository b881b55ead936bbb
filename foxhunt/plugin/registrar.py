"""What a plugin's ``foxhunt_declare`` hook receives: a typed registrar bound to that plugin.

Every claim is recorded with its owner so the frozen layout, the state-reset
registry, the named-dimension tables and the plugins' settings can say who
declared what, and every problem can name the plugin responsible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from foxhunt.config_loading import structure_problems
from foxhunt.dims import DimTable
from foxhunt.errors import LayoutError, LifecycleError
from foxhunt.isv import Slot
from foxhunt.state import ResetCategory, StateEntry

__all__ = ["Registrar", "Declarations"]

T = TypeVar("T")


@attrs.define
class Declarations:
    """Everything declared by every plugin during the *declaring* phase."""

    slots: list[Slot] = attrs.Factory(list)
    states: list[StateEntry] = attrs.Factory(list)
    dims: dict[str, tuple[str, type[DimTable]]] = attrs.Factory(dict)  # table name -> (owner, table)
    problems: list[tuple[str, str]] = attrs.Factory(list)  # (owner, message)
    sections: dict[str, dict[str, Any]] = attrs.Factory(dict)  # plugin -> its [plugins.<name>] table, as written
    profile_sections: dict[str, dict[str, Any]] = attrs.Factory(dict)  # plugin -> the run-size profile's values
    settings: dict[str, Any] = attrs.Factory(dict)  # plugin -> its resolved settings instance
    frozen: bool = False


class Registrar:
    """Bound to one plugin; collects its slots, state entries, dimension tables and settings.

    Invalid claims are recorded as problems (reported together at freeze), not
    raised one by one, so a plugin author sees everything that is wrong at once.
    """

    def __init__(self, owner: str, declarations: Declarations) -> None:
        self.owner = owner
        self._declarations = declarations

    def _check_open(self, what: str) -> None:
        if self._declarations.frozen:
            raise LifecycleError(
                f"plugin {self.owner!r} tried to declare {what} after the layout was frozen; "
                "declare everything inside foxhunt_declare"
            )

    def slot(self, name: str, *, width: int = 1, init: float = 0.0, doc: str = "") -> str:
        """Claim an ISV slot of ``width`` float32 values starting at ``init``; returns ``name``.

        Every slot also needs a state entry: ``registrar.state(name, category)``.
        """
        self._check_open(f"ISV slot {name!r}")
        try:
            self._declarations.slots.append(Slot(name, width, self.owner, doc, float(init)))
        except (LayoutError, TypeError, ValueError) as error:
            self._declarations.problems.append((self.owner, f"invalid ISV slot {name!r}: {error}"))
        return name

    def state(
        self,
        name: str,
        category: ResetCategory | str,
        *,
        reset: Callable[[Any], None] | None = None,
        decay_steps: int | None = None,
        doc: str = "",
        factory: Callable[[], Any] | None = None,
    ) -> str:
        """Register a state-reset entry; returns ``name``.

        For an ISV slot use the slot's name and leave ``reset`` out: the
        registry writes the slot's ``init`` (for soft-reset: its bootstrap).
        For other state pass ``reset(obj)``; the core attaches ``obj`` when it
        owns the object (learner, environment, monitors), and a plugin that
        owns the object itself passes ``factory`` to build it at run start.
        """
        self._check_open(f"state entry {name!r}")
        try:
            entry = StateEntry(name, self.owner, category, reset, decay_steps, doc, factory=factory)
        except ValueError:
            known = ", ".join(str(c) for c in ResetCategory)
            self._declarations.problems.append(
                (self.owner, f"state entry {name!r}: unknown category {category!r} (use one of: {known})")
            )
            return name
        if entry.category is ResetCategory.SOFT_RESET and not decay_steps:
            self._declarations.problems.append(
                (self.owner, f"soft-reset state entry {name!r} needs decay_steps (the EMA length it decays over)")
            )
        self._declarations.states.append(entry)
        return name

    def dims(self, table: type[DimTable]) -> type[DimTable]:
        """Publish a named-dimension table (exported to registry/dims.toml); returns it."""
        self._check_open(f"dimension table {getattr(table, '__name__', table)!r}")
        if not (isinstance(table, type) and issubclass(table, DimTable)):
            self._declarations.problems.append((self.owner, f"dims() takes a DimTable subclass, got {table!r}"))
            return table
        known = self._declarations.dims.get(table.__name__)
        if known is not None and known[1] is not table:
            self._declarations.problems.append(
                (self.owner, f"dimension table {table.__name__!r} is already declared by plugin {known[0]!r}")
            )
        else:
            self._declarations.dims[table.__name__] = (self.owner, table)
        return table

    def settings(self, cls: type[T]) -> T | None:
        """Declare this plugin's settings as the attrs class ``cls``; returns the run's resolved instance.

        Users set them under ``[plugins.<name>]`` (``--set plugins.<name>.<key>=...``); keys left out take
        the class's defaults. The same instance is handed to the plugin's component hooks as ``settings``.
        A bad section (unknown key, wrong type, a validator's refusal) is a problem reported at freeze,
        each with its key path; meanwhile this returns the defaults (``None`` if the class has none).
        """
        name = getattr(cls, "__name__", repr(cls))
        self._check_open(f"settings {name!r}")
        if not attrs.has(cls):
            self._declarations.problems.append(
                (self.owner, f"settings() takes an attrs class (decorate {name} with @attrs.frozen), got {cls!r}")
            )
            return None
        if self.owner in self._declarations.settings:
            self._declarations.problems.append(
                (self.owner, "settings() was called twice; declare one class holding every setting of the plugin")
            )
            return self._declarations.settings[self.owner]
        # the profile's values sit beneath what the user wrote (foxhunt.profiles.plugin_defaults)
        section = {**self._declarations.profile_sections.get(self.owner, {}),
                   **self._declarations.sections.get(self.owner, {})}
        known = [field.alias or field.name for field in attrs.fields(cls)]
        for key in sorted(set(section) - set(known)):
            del section[key]
            self._declarations.problems.append((
                self.owner,
                f"plugins.{self.owner}.{key}: unknown key; the settings of plugin {self.owner!r} are "
                f"{', '.join(known) or '(none)'} (`foxhunt plugins inspect {self.owner}` shows them with their defaults)",
            ))
        instance, problems = structure_problems(section, cls)
        for path, reason in problems:
            where = f"plugins.{self.owner}.{path}" if path and path != "(top level)" else f"[plugins.{self.owner}]"
            self._declarations.problems.append(
                (self.owner, f"{where}: {reason} (fix [plugins.{self.owner}] in the config or its --set)")
            )
        if instance is None:
            instance, _ = structure_problems({}, cls)
        self._declarations.settings[self.owner] = instance
        return instance
