"""Which file column plays which role (time, open, high, low, close, volume).

Names are matched case-insensitively after trimming spaces and MetaTrader's angle
brackets (``<CLOSE>``), so two columns whose names differ only in case (``close``
and ``Close``) are an error when detection would pick one of them: the other
would be ignored without a word. A mapping given by the user names one exactly
and wins over detection; ``volume`` may be mapped to ``None`` (or ``""``, which
TOML can write) for files without volume (FX quotes often have none), which loads
zero volume and says so in the report. ``Adj Close`` is never picked up by
detection: adjusted and raw closes differ after splits and dividends, so using it
must be a deliberate ``{"close": "Adj Close"}``.

Two layouts are recognised beyond the roles' names: an unnamed first column is the
time when no column is named as one (what pandas' ``DataFrame.to_csv`` writes for
a time index; ``__index_level_0__`` in its Parquet files), and a file without
open, high and low columns is a close-only series (FRED's ``DATE,SP500``) when
its one remaining column, or the mapped one, is the close (even ``Adj Close``:
with no other close there is nothing to choose between).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from foxhunt.data.hints import set_columns
from foxhunt.errors import DataError

__all__ = ["ROLES", "ALIASES", "ColumnMap", "resolve_columns"]

ROLES: tuple[str, ...] = ("time", "open", "high", "low", "close", "volume")

ALIASES: dict[str, tuple[str, ...]] = {
    "time": (
        "time", "date", "timestamp", "datetime", "date_time", "ts_event", "gmt time", "local time", "time (utc)",
        "open_time", "open time", "observation_date",
    ),
    "open": ("open", "o"),
    "high": ("high", "h"),
    "low": ("low", "l"),
    "close": ("close", "c", "last"),
    "volume": ("volume", "vol", "v"),
}  # fmt: skip
_BARS = ("open", "high", "low")
_PANDAS_INDEX = "__index_level_0__"


def _key(name: str) -> str:
    return name.strip().strip("<>").strip().lower()


@attrs.frozen
class ColumnMap:
    """The file's column names per role; ``time`` may be two columns (a date and a time) joined by a space.

    ``open``, ``high`` and ``low`` are None for a close-only series: the loader sets them to the close.
    """

    time: tuple[str, ...]
    open: str | None
    high: str | None
    low: str | None
    close: str
    volume: str | None

    @property
    def close_only(self) -> bool:
        return self.open is None

    @property
    def time_label(self) -> str:
        """The time column(s) as messages name them; pandas' unnamed index column is "(unnamed column 1)"."""
        return "+".join(name or "(unnamed column 1)" for name in self.time)

    @property
    def needed(self) -> list[str]:
        names = [*self.time, *(name for name in (self.open, self.high, self.low) if name is not None), self.close]
        return names + ([self.volume] if self.volume is not None else [])

    def ohlcv_names(self) -> tuple[str, ...]:
        """The column named in messages about each OHLCV field (the close for all four prices of a close-only series)."""
        return (self.open or self.close, self.high or self.close, self.low or self.close, self.close, self.volume or "volume")

    def roles(self) -> tuple[tuple[str, str], ...]:
        """(role, column) pairs for the load report."""
        pairs = [("time", self.time_label)]
        pairs += [(role, getattr(self, role)) for role in ("open", "high", "low", "close", "volume") if getattr(self, role)]
        return tuple(pairs)


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
        by_lower.setdefault(_key(name), []).append(name)
    chosen: dict[str, str | tuple[str, ...] | None] = {}
    problems: list[str] = []
    troubled: set[str] = set()  # roles a problem is already about

    def detected(alias: str, role: str) -> str:
        names = by_lower[alias]
        if len(names) > 1:
            troubled.add(role)
        if len(set(names)) == 1 < len(names):
            problems.append(f"{len(names)} columns are named {names[0]!r}, so which one is the {role} column is "
                            "ambiguous; rename or drop all but one")
        elif len(names) > 1:
            problems.append(
                f"columns {' and '.join(repr(n) for n in names)} differ only in case, so which one is the {role} "
                f"column is ambiguous; rename or drop one, or map one, e.g. {set_columns({role: names[-1]})}"
            )
        return names[0]

    for role in ROLES:
        if role in mapping:
            troubled.add(role)
            wanted = mapping[role]
            if wanted in (None, "") and role == "volume":
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
        if role == "volume" and not hits:
            # "Volume BTC" and "Volume USDT" (a crypto export's base and quote volume): one is taken, two are a choice.
            hits = [name for name in header if _key(name).startswith(("volume ", "volume_", "vol "))]
        if role == "time" and not hits:
            # pandas' unnamed index: an empty first header cell in a CSV, __index_level_0__ in a Parquet file.
            hits = [name for i, name in enumerate(header) if (i == 0 and not name.strip()) or name == _PANDAS_INDEX]
        if len(hits) == 1:
            chosen[role] = hits[0]
        elif len(hits) > 1:
            troubled.add(role)
            problems.append(f"{role} could be any of {hits}; say which, e.g. {set_columns({role: hits[0]})}")
    if not any(role in chosen or role in mapping for role in _BARS):
        troubled.update(_close_only(header, chosen, mapping, problems))
    for role in ROLES:
        if role not in chosen and role not in troubled:
            looked = ", ".join(repr(a) for a in ALIASES[role][:4])
            fix = f"; a file without volume loads with {set_columns({'volume': ''})}" if role == "volume" else ""
            problems.append(f"no {role} column (looked for {looked}, any case){fix}")
    if problems:
        raise DataError(
            f"{source}: {where}, columns {list(header)}: " + "; ".join(problems)
            + ". Rename the columns, or map each role to a column with --set 'data.columns={role=\"name\", ...}'"
        )
    time = chosen["time"]
    return ColumnMap(
        time=time if isinstance(time, tuple) else (time,),
        open=chosen.get("open"),
        high=chosen.get("high"),
        low=chosen.get("low"),
        close=chosen["close"],
        volume=chosen["volume"],
    )


def _close_only(
    header: Sequence[str], chosen: dict[str, str | tuple[str, ...] | None], mapping: Mapping[str, str | None], problems: list[str]
) -> set[str]:
    """No open, high or low: a close-only series when its close is known (mapped, or the one column left).

    Returns the roles a problem it found is about.
    """
    time = chosen.get("time")
    used = {*(time if isinstance(time, tuple) else (time,)), chosen.get("close"), chosen.get("volume")}
    left = [name for name in header if name not in used and name.strip()]
    if "close" not in mapping:
        if left and (len(left) > 1 or "close" in chosen):
            options = [name for name in (chosen.get("close"), *left) if name]
            problems.append(
                f"there is no open, high or low column, so the file reads as a close-only series, but its close "
                f"could be any of {options}; say which with {set_columns({'close': options[0]})}"
            )
            return {"close", *_BARS}
        if "close" not in chosen and left:
            chosen["close"] = left[0]
    if "volume" not in mapping:
        chosen.setdefault("volume", None)
    for role in _BARS:
        chosen[role] = None
    return set()
