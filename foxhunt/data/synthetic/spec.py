"""The ``synthetic:<kind>?key=value`` grammar: kinds, their keys and defaults, and the parsed spec.

Two families of defaults. ``planted`` and ``regime`` are daily markets at price 100
traded as the small futures-like ``SYNTH`` contract (their numbers predate the
learning suite and tests rely on them). The learning-suite kinds (``ar1``,
``meanrev``, ``trend``, ``randomwalk``) are hourly, back-to-back bars with
EUR/USD-like level and volatility (price 1.1, 0.1 % per bar; the bundled 2017
EUR/USD has 0.092 %) traded as ``SYNTHFX``, the ``FX`` preset's economics, so the
costs an agent and its oracle pay are those of the bundled FX data.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import attrs

from foxhunt.data.instrument import PRESETS, InstrumentSpec
from foxhunt.data.market import MarketData
from foxhunt.errors import DataError

__all__ = [
    "KINDS",
    "PREFIX",
    "KIND_KEYS",
    "COMMON_KEYS",
    "SyntheticSpec",
    "parse_spec",
    "spec_of",
    "instrument_for",
    "SYNTHETIC_INSTRUMENT",
    "SYNTHETIC_FX_INSTRUMENT",
]

PREFIX = "synthetic:"
COMMON_KEYS = ("bars", "seed", "bar", "start", "price", "vol")
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "planted": ("snr", "memory"),
    "regime": ("stay",),
    "ar1": ("phi",),
    "meanrev": ("kappa",),
    "trend": ("drift", "stay"),
    "randomwalk": (),
}
KINDS = tuple(KIND_KEYS)

_DAILY = {"bar": "1d", "price": 100.0, "vol": 0.01}
_HOURLY_FX = {"bar": "1h", "price": 1.1, "vol": 0.001}
_KIND_DEFAULTS: dict[str, dict[str, object]] = {
    "planted": _DAILY,
    "regime": {**_DAILY, "stay": 0.98},
    "ar1": _HOURLY_FX,
    "meanrev": _HOURLY_FX,
    "trend": {**_HOURLY_FX, "stay": 0.995},
    "randomwalk": _HOURLY_FX,
}
_FX_KINDS = ("ar1", "meanrev", "trend", "randomwalk")

# A small futures-like contract: at the default price 100 one contract is 5,000 of
# notional; one tick of spread and 2.0 commission per side cost about 5 bp.
SYNTHETIC_INSTRUMENT = InstrumentSpec("SYNTH", 0.01, 50.0, 2.0, 500.0, 450.0, bar_frequency="1d", bars_per_year=252.0)
# The FX preset (the bundled EUR/USD's economics): at price 1.1 one contract is 110,000 of notional; a
# PASSIVE market order pays half a tick of spread, a quarter tick of slippage and 2.0 commission, about 0.25 bp.
SYNTHETIC_FX_INSTRUMENT = attrs.evolve(PRESETS["FX"], symbol="SYNTHFX")


# A key a kind does not use still gets a value (the regime's), so every spec has every field.
_UNUSED = {**_DAILY, "stay": 0.98}


def _kind_default(key: str):
    # Defaults follow the kind (the first field), so a spec built in code matches the parsed one.
    return attrs.Factory(lambda self: _KIND_DEFAULTS.get(self.kind, _UNUSED).get(key, _UNUSED[key]), takes_self=True)


def _at_least_two(instance: object, attribute: attrs.Attribute, value: int) -> None:
    if value < 2:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be an integer >= 2")


def _unit_interval(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be in [0, 1)")


def _open_unit_interval(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be in (0, 1)")


def _stationary_coefficient(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not -1.0 < value < 1.0:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be in (-1, 1) for a stationary AR(1)")


def _positive(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value > 0:
        raise DataError(f"synthetic spec: {attribute.name}={value} must be > 0")


@attrs.frozen
class SyntheticSpec:
    """A parsed ``synthetic:`` source. Every field is a key of the grammar; a kind uses :data:`COMMON_KEYS`
    and its own :data:`KIND_KEYS`."""

    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    bars: int = attrs.field(default=5000, validator=_at_least_two)
    seed: int = 0
    bar: str = attrs.field(default=_kind_default("bar"))  # daily bars fall on weekdays, shorter ones are back to back
    start: str = "2000-01-03"  # first bar (UTC)
    price: float = attrs.field(default=_kind_default("price"), validator=_positive)  # first close
    vol: float = attrs.field(default=_kind_default("vol"), validator=_positive)  # per-bar noise std (log return)
    snr: float = attrs.field(default=0.4, validator=_positive)  # planted: std of the predictable mean / vol
    memory: float = attrs.field(default=0.5, validator=_unit_interval)  # planted: EMA coefficient of the signal
    stay: float = attrs.field(default=_kind_default("stay"), validator=_unit_interval)  # regime, trend: keep the state
    phi: float = attrs.field(default=0.1, validator=_stationary_coefficient)  # ar1: lag-one coefficient of returns
    kappa: float = attrs.field(default=0.01, validator=_open_unit_interval)  # meanrev: pull toward the level per bar
    drift: float = attrs.field(default=0.15, validator=_positive)  # trend: |drift| per bar, in units of vol

    def canonical(self) -> str:
        keys = COMMON_KEYS + KIND_KEYS[self.kind]
        return PREFIX + self.kind + "?" + "&".join(f"{key}={getattr(self, key)}" for key in keys)


def parse_spec(text: str) -> SyntheticSpec:
    """Parse ``synthetic:<kind>?key=value&...``; unknown kinds or keys are errors that list the valid ones."""
    if not text.startswith(PREFIX):
        raise DataError(f"{text!r} is not a synthetic spec; it must start with {PREFIX!r}")
    kind, _, query = text[len(PREFIX):].partition("?")
    if kind not in KINDS:
        raise DataError(f"{text!r}: unknown synthetic kind {kind!r}; use one of {list(KINDS)}")
    allowed = set(COMMON_KEYS) | set(KIND_KEYS[kind])
    values: dict[str, object] = {}
    for key, raw in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)) if query else []:
        if key not in allowed:
            raise DataError(f"{text!r}: key {key!r} is not valid for synthetic:{kind}; valid keys: {sorted(allowed)}")
        convert = {"bars": int, "seed": int, "bar": str, "start": str}.get(key, float)
        try:
            values[key] = convert(raw)
        except ValueError:
            raise DataError(f"{text!r}: {key}={raw!r} is not a valid {convert.__name__}") from None
    return SyntheticSpec(kind=kind, **values)


def spec_of(market: MarketData, *kinds: str) -> SyntheticSpec:
    """The spec a synthetic market was generated from (its source); an error when it is not one of ``kinds``."""
    spec = parse_spec(market.source) if market.source.startswith(PREFIX) else None
    if spec is None or (kinds and spec.kind not in kinds):
        wanted = " or ".join(f"synthetic:{kind}" for kind in kinds) if kinds else "synthetic"
        raise DataError(f"{market.source}: this is not a {wanted} market, so it has no known model to compute from")
    return spec


def instrument_for(spec: SyntheticSpec) -> InstrumentSpec:
    """The default contract of a kind (bar frequency and bars per year are set from the timestamps later)."""
    return SYNTHETIC_FX_INSTRUMENT if spec.kind in _FX_KINDS else SYNTHETIC_INSTRUMENT
