"""A named record picked by a config key from those the loaded plugins provide (a combiner, an encoder).

One wording for every such choice: the reason a name cannot be used lists what is available and says
which key to set, for ``check_config``'s paragraph and for the learner's own refusal alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from foxhunt.errors import ConfigError

__all__ = ["unknown_choice", "select_choice"]

Named = TypeVar("Named")


def unknown_choice(records: Sequence[Any], name: str, what: str, key: str) -> str | None:
    """Why ``name`` cannot be used as ``key`` (no loaded plugin provides a ``what`` of that name), or None."""
    if any(record.name == name for record in records):
        return None
    available = ", ".join(sorted(record.name for record in records)) or "none"
    section, _, field = key.rpartition(".")
    return (f"{name!r} is not {what} of any loaded plugin (available: {available}); "
            f"set [{section}] {field} to one of them, or enable the plugin that provides {name!r}")


def select_choice(records: Sequence[Named], name: str, what: str, key: str) -> Named:
    """The record called ``name``; a :class:`ConfigError` naming ``key`` and the available ones otherwise."""
    reason = unknown_choice(records, name, what, key)
    if reason is not None:
        raise ConfigError(f"{key}: {reason}")
    return next(record for record in records if record.name == name)  # type: ignore[attr-defined]
