"""Turn TOML files and ``--set`` overrides into frozen attrs configs, with errors people can act on.

Every config is an attrs frozen class structured by one cattrs converter that
forbids extra keys. Structuring errors are flattened into one
:class:`~foxhunt.errors.ConfigError` whose lines name the file (or ``--set``),
the key path and the reason, keeping attrs validator messages intact.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, get_origin

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from foxhunt.errors import ConfigError

__all__ = [
    "converter",
    "structure",
    "structure_problems",
    "unstructure",
    "load_toml",
    "apply_overrides",
    "parse_override",
    "deep_copy",
    "MovedKey",
    "MovedKeysError",
]

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=True)
_NAMED_MESSAGE = re.compile(r"^'(\w+)' ")


@attrs.frozen
class MovedKey:
    """A key (or a section) that a newer config layout keeps elsewhere: ``old`` path, ``new`` path, and why."""

    old: str
    new: str
    why: str


class MovedKeysError(ValueError):
    """A config that sets keys which have moved; each key is reported with the one to write instead."""

    def __init__(self, moves: list[MovedKey]) -> None:
        self.moves = list(moves)
        super().__init__("; ".join(f"{move.old} moved to {move.new}" for move in self.moves))


def _strict(expected: str, accepts) -> Any:
    def hook(value: Any, type_: type) -> Any:
        if not accepts(value):
            raise TypeError(f"expected {expected}, got {type(value).__name__} {value!r}")
        return type_(value)

    return hook


# cattrs' defaults call bool()/int()/str() on anything: "false" became True, 1.5 became 1 and
# "abc" became ('a', 'b', 'c'). A config value of the wrong type is an error, never a cast.
converter.register_structure_hook(bool, _strict("true or false", lambda v: isinstance(v, bool)))
converter.register_structure_hook(
    int, _strict("an integer", lambda v: type(v) is int or (type(v) is float and v.is_integer()))
)
converter.register_structure_hook(float, _strict("a number", lambda v: type(v) in (int, float)))
converter.register_structure_hook(str, _strict("a string", lambda v: isinstance(v, str)))
_sequences = converter.copy()


def _structure_sequence(value: Any, type_: type) -> Any:
    if isinstance(value, (str, bytes, Mapping)):
        raise TypeError(f"expected a list, got {type(value).__name__} {value!r}")
    return _sequences.structure(value, type_)


converter.register_structure_hook_func(lambda t: get_origin(t) in (tuple, list, set, frozenset), _structure_sequence)


def _reasons(error: BaseException, path: str) -> Iterable[tuple[str, str]]:
    """Yield ``(key path, reason)`` for every leaf error inside a cattrs exception group."""
    if isinstance(error, ClassValidationError):
        with_notes, without_notes = error.group_exceptions()
        for sub, note in with_notes:
            yield from _reasons(sub, f"{path}.{note.name}" if path else note.name)
        for sub in without_notes:
            yield from _reasons(sub, path)
    elif isinstance(error, IterableValidationError):
        with_notes, without_notes = error.group_exceptions()
        for sub, note in with_notes:
            yield from _reasons(sub, f"{path}[{note.index!r}]")
        for sub in without_notes:
            yield from _reasons(sub, path)
    elif isinstance(error, MovedKeysError):
        for move in error.moves:
            section, _, key = move.new.rpartition(".")
            yield (
                f"{path}.{move.old}" if path else move.old,
                f"this key moved to {move.new} ({move.why}); write `{key} = ...` under [{section}], "
                f"or --set {move.new}=...",
            )
    elif isinstance(error, ForbiddenExtraKeysError):
        for key in sorted(error.extra_fields):
            yield (f"{path}.{key}" if path else key, "unknown key (check the spelling; `foxhunt config show` lists every key)")
    elif isinstance(error, (ValueError, TypeError)) and len(error.args) >= 2 and isinstance(error.args[1], attrs.Attribute):
        # attrs' own validators raise ValueError(message, attribute, validator, value).
        attribute = error.args[1]
        yield (f"{path}.{attribute.name}" if path else attribute.name, str(error.args[0]))
    elif isinstance(error, ValueError) and (named := _NAMED_MESSAGE.match(str(error))):
        # attrs' number validators name the attribute only in the message: "'seed' must be >= 0: -1".
        yield (f"{path}.{named.group(1)}" if path else named.group(1), str(error))
    elif isinstance(error, KeyError):
        yield (path, f"missing required key {error.args[0]!r}")
    else:
        yield (path or "(top level)", str(error) or type(error).__name__)


def structure(data: Mapping[str, Any], cls: type[T], *, source: str = "config") -> T:
    """Build ``cls`` from plain data, raising one :class:`ConfigError` listing every problem."""
    instance, problems = structure_problems(data, cls)
    if problems:
        lines = [f"{source}: {path}: {reason}" for path, reason in problems]
        raise ConfigError("invalid configuration:\n" + "\n".join(f"  {line}" for line in lines))
    return instance


def structure_problems(data: Mapping[str, Any], cls: type[T]) -> tuple[T | None, list[tuple[str, str]]]:
    """Build ``cls`` from plain data: ``(instance, [])``, or ``(None, [(key path, reason), ...])``."""
    try:
        return converter.structure(dict(data), cls), []
    except (ClassValidationError, IterableValidationError, ForbiddenExtraKeysError, ValueError, TypeError) as error:
        return None, list(_reasons(error, ""))


def unstructure(config: Any) -> dict[str, Any]:
    """Plain dict of a config (tuples become lists; ready for TOML)."""
    return converter.unstructure(config)


def load_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file; syntax errors name the file, line and column, bytes that are not UTF-8 their line."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as error:  # a directory, no permission, an I/O error
        raise ConfigError(f"{path}: cannot read the config file: {error.strerror or error}") from None
    try:
        # TOML is UTF-8 by definition; "-sig" drops the byte-order mark some Windows editors put before it.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        # A file saved as Latin-1, cp1252 or UTF-16 fails here: say where, not just that.
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"{path}: line {line}: byte {data[error.start]:#04x} is not UTF-8 text, and TOML files must be UTF-8. "
            "Save the file as UTF-8 and run again"
        ) from None
    try:
        return _parse_toml(text)
    except ValueError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None


def _parse_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads`` whose every refusal is a ValueError (TOMLDecodeError is one).

    tomllib recurses once per level of nested arrays or inline tables, so a few thousand levels raised
    RecursionError; an integer of more digits than Python converts (4300) raised a ValueError with no line.
    """
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("arrays or inline tables nested too deep to read (a config needs a few levels)") from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as error:  # int('9' * 5000): Python's limit on converting long digit strings
        raise ValueError(f"a number too long to read ({error})") from None


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"learner.lr=3e-4"`` -> ``(["learner", "lr"], 0.0003)``; the value is read as TOML, else as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part.strip() for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with a dotted key, e.g. --set learner.lr=3e-4")
    try:
        value = _parse_toml(f"value = {raw.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    except ValueError as error:
        raise ConfigError(f"--set {text!r}: {error}") from None
    return [part.strip() for part in key.split(".")], value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides to nested plain data (copying the dicts it changes)."""
    result = deep_copy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node = result
        for depth, key in enumerate(keys[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                prefix = ".".join(keys[: depth + 1])
                raise ConfigError(f"--set {text!r}: {prefix} is a value, not a section")
            node = child
        node[keys[-1]] = value
    return result


def deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of nested plain config data whose dicts can be changed without touching ``data``."""
    return {k: deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}
