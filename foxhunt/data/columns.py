"""Which file column plays which role (time, open, high, low, close, volume).

Names are matched case-insensitively after trimming, so two columns whose names
differ only in case (``close`` and ``Close``) are an error when detection would
pick one of them: the other would be ignored without a word. A mapping given by
the user names one exactly and wins over detection; ``volume`` may be mapped to ``None`` for files without volume
(FX quotes often have none), which loads zero volume and says so in the report.
``Adj Close`` is never picked up by detection: adjusted and raw closes differ
after splits and dividends, so using it must be a deliberate ``{"close": "Adj Close"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from foxhunt.errors import DataError

__all__ = ["ROLES", "ALIASES", "ColumnMap", "resolve_columns"]

ROLES: tuple[str, ...] = ("time", "open", "high", "low", "close", "volume")

ALIASES: dict[str, tuple[str, ...]] = {
    "time": ("time", "date", "timestamp", "datetime", "date_time", "ts_event", "gmt time", "local time", "time (utc)"),
    "open": ("open", "o"),
    "high": ("high", "h"),
    "low": ("low", "l"),
    "close": ("close", "c", "last"),
    "volume": ("volume", "vol", "v"),
}


@attrs.frozen
class ColumnMap:
    """The file's column names per role; ``time`` may be two columns (a date and a time) joined by a space."""

    time: tuple[str, ...]
    open: str
    high: str
    low: str
    close: str
    volume: str | None

    @property
    def time_label(self) -> str:
        return "+".join(self.time)

    @property
    def needed(self) -> list[str]:
        names = [*self.time, self.open, self.high, self.low, self.close]
        return names + ([self.volume] if self.volume is not None else [])

    def ohlcv_names(self) -> tuple[str, ...]:
        return (self.open, self.high, self.low, self.close, self.volume or "volume")


def resolve_columns(
    source: str, header: Sequence[str], mapping: Mapping[str, str | None] | None = None, where: str = "header (line 1)"
) -> ColumnMap:
    """Match roles to header names; one DataError listing what is missing or ambiguous."""
    mapping = dict(mapping or {})
    unknown = sorted(set(mapping) - set(ROLES))
    if unknown:
        raise DataError(f"{source}: unknown column role(s) {unknown} in the column mapping; roles are {list(ROLES)}")
    # Every header name under its case-folded form: detection is case-insensitive, so two names that differ
    # only in case (close and Close) both match, and picking the first would read one column silently.
    by_lower: dict[str, list[str]] = {}
    for name in header:
        by_lower.setdefault(name.strip().lower(), []).append(name)
    chosen: dict[str, str | tuple[str, ...] | None] = {}
    problems = []

    def detected(alias: str, role: str) -> str:
        names = by_lower[alias]
        if len(set(names)) == 1 < len(names):
            problems.append(f"{len(names)} columns are named {names[0]!r}, so which one is the {role} column is "
                            "ambiguous; rename or drop all but one")
        elif len(names) > 1:
            problems.append(
                f"columns {' and '.join(repr(n) for n in names)} differ only in case, so which one is the {role} "
                f"column is ambiguous; rename or drop one, or map one, e.g. columns={{'{role}': '{names[-1]}'}}"
            )
        return names[0]

    for role in ROLES:
        if role in mapping:
            wanted = mapping[role]
            if wanted is None and role == "volume":
                chosen[role] = None
            elif wanted is None or wanted not in header:
                problems.append(f"{role} is mapped to {wanted!r}, which is not a column")
            elif list(header).count(wanted) > 1:
                problems.append(f"{role} is mapped to {wanted!r}, and {list(header).count(wanted)} columns have that name")
            else:
                chosen[role] = wanted
            continue
        if role == "time" and {"date", "time"} <= set(by_lower):
            chosen[role] = (detected("date", "date"), detected("time", "time"))
            continue
        hits = [detected(alias, role) for alias in ALIASES[role] if alias in by_lower]
        if len(hits) == 1:
            chosen[role] = hits[0]
        elif len(hits) > 1:
            problems.append(f"{role} could be any of {hits}; map one, e.g. columns={{'{role}': '{hits[0]}'}}")
        else:
            problems.append(f"no {role} column (looked for {', '.join(repr(a) for a in ALIASES[role][:4])}, any case)")
    if problems:
        raise DataError(
            f"{source}: {where}, columns {list(header)}: " + "; ".join(problems)
            + ". Rename the columns or pass a column mapping (DataConfig.columns)"
        )
    time = chosen["time"]
    return ColumnMap(
        time=time if isinstance(time, tuple) else (time,),
        open=chosen["open"],
        high=chosen["high"],
        low=chosen["low"],
        close=chosen["close"],
        volume=chosen["volume"],
    )
