"""``[data]`` section of the run config."""

from __future__ import annotations

import zoneinfo

import attrs

from foxhunt.data.bars import BAR_KINDS, check_bar_settings
from foxhunt.data.columns import ROLES
from foxhunt.data.instrument import PRESETS
from foxhunt.data.layout import DECIMALS, DELIMITERS
from foxhunt.data.missing import MISSING_POLICIES

__all__ = ["DataConfig"]


def _preset_or_none(instance: object, attribute: attrs.Attribute, value: str | None) -> None:
    if value is not None and value.upper() not in PRESETS:
        raise ValueError(f"instrument {value!r} is not a preset; use one of {sorted(PRESETS)} or leave it unset")


def _roles(instance: object, attribute: attrs.Attribute, value: dict[str, str | None]) -> None:
    unknown = sorted(set(value) - set(ROLES))
    if unknown:
        raise ValueError(f"columns has unknown role(s) {unknown}; roles are {list(ROLES)}")


def _timezone(instance: object, attribute: attrs.Attribute, value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"timezone {value!r} is not an IANA zone name (e.g. 'UTC', 'America/New_York')") from None


def _bar(instance: object, attribute: attrs.Attribute, value: str) -> None:
    from foxhunt.data.dbn import parse_bar

    parse_bar(value)


@attrs.frozen
class DataConfig:
    """Where the bars come from and how to read them (docs/data.md).

    ``source``: a bundled dataset name, a ``synthetic:`` spec, or a file path.
    ``instrument``: a preset name (ES, NQ, CL, 6E, EQUITY, FX) or None for the
    source's default. ``columns``: role -> column name (volume may be None, or
    "" in TOML, for no volume column; a headerless CSV's columns are named
    "column 1", "column 2", ...). ``timezone``: IANA zone of naive timestamps.
    ``bar``: bar length for DBN trades and MBP-10. ``duplicates``: "error" or
    "drop_identical". ``missing``: what happens to rows with missing values
    ("drop_empty", "drop" or "error"; docs/data.md, "Missing values").
    ``delimiter`` and ``decimal``: a text file's field separator (",", ";",
    "\\t", "|") and decimal mark ("." or ","), detected when None.
    ``instrument_id``: the instrument to load from a DBN file holding several.
    ``bars``: "time" (the source's bars, the default) or "volume" (re-sampled into bars that each close once
    ``volume_per_bar`` of volume has traded; docs/data.md, "Volume bars"; off by default, unmeasured).
    """

    source: str = "eurusd-1h-2017"
    instrument: str | None = attrs.field(default=None, validator=_preset_or_none)
    columns: dict[str, str | None] = attrs.field(factory=dict, validator=_roles)
    timezone: str = attrs.field(default="UTC", validator=_timezone)
    timestamp_format: str | None = None
    bar: str = attrs.field(default="1m", validator=_bar)
    duplicates: str = attrs.field(default="error", validator=attrs.validators.in_(("error", "drop_identical")))
    missing: str = attrs.field(default="drop_empty", validator=attrs.validators.in_(MISSING_POLICIES))
    delimiter: str | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.in_(DELIMITERS)))
    decimal: str | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.in_(DECIMALS)))
    instrument_id: int | None = None
    bars: str = attrs.field(default="time", validator=attrs.validators.in_(BAR_KINDS))
    volume_per_bar: float | None = None

    def __attrs_post_init__(self) -> None:
        check_bar_settings(self.bars, self.volume_per_bar)
