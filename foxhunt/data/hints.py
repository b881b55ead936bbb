"""How error messages name the ``--set data.…`` keys that fix them.

Every data error that a setting can resolve ends with the exact command-line text
to pass to ``foxhunt train`` or ``foxhunt data inspect``. Values are written as
TOML strings inside single quotes, so a shell passes them through unchanged
(spaces, ``%`` and ``;`` included) and the config loader reads them as strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["set_columns", "set_option"]


def _toml_string(value: str) -> str:
    # A JSON string is a TOML basic string for every character a column name or format holds.
    return json.dumps(value, ensure_ascii=False)


def set_option(key: str, value: str) -> str:
    """``--set 'data.KEY="VALUE"'``."""
    return f"--set 'data.{key}={_toml_string(value)}'"


def set_columns(mapping: Mapping[str, str]) -> str:
    """``--set 'data.columns={role="name", ...}'``; an empty name for volume means "no volume column"."""
    pairs = ", ".join(f"{role}={_toml_string(name)}" for role, name in mapping.items())
    return f"--set 'data.columns={{{pairs}}}'"
