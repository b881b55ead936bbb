"""What is traded: the contract's economics, independent of any price series."""

from __future__ import annotations

import attrs

__all__ = ["InstrumentSpec", "PRESETS", "preset"]


def _positive(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value!r}")


def _non_negative(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not value >= 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class InstrumentSpec:
    """Contract economics used by the environment's physics.

    Money is in ``currency``. One contract moving one price unit changes equity by
    ``multiplier``. ``bars_per_year`` annualises Sharpe/Sortino.
    """

    symbol: str
    tick_size: float = attrs.field(validator=_positive)
    multiplier: float = attrs.field(validator=_positive)
    commission: float = attrs.field(validator=_non_negative)  # per contract, per side
    initial_margin: float = attrs.field(validator=_non_negative)  # per contract
    maintenance_margin: float = attrs.field(validator=_non_negative)  # per contract
    currency: str = "USD"
    bar_frequency: str = "1d"  # informational: "1h", "1d", "1m", ...
    bars_per_year: float = attrs.field(default=252.0, validator=_positive)
    spread_ticks: float = attrs.field(default=1.0, validator=_non_negative)  # quoted bid/ask spread


PRESETS: dict[str, InstrumentSpec] = {
    # CME E-mini S&P 500: $50 x index, 0.25 tick.
    "ES": InstrumentSpec("ES", 0.25, 50.0, 2.25, 12_650.0, 11_500.0, bar_frequency="1d", bars_per_year=252.0),
    # CME E-mini Nasdaq-100: $20 x index, 0.25 tick.
    "NQ": InstrumentSpec("NQ", 0.25, 20.0, 2.25, 18_700.0, 17_000.0, bar_frequency="1d", bars_per_year=252.0),
    # NYMEX WTI crude: 1,000 barrels, $0.01 tick.
    "CL": InstrumentSpec("CL", 0.01, 1000.0, 2.50, 6_600.0, 6_000.0, bar_frequency="1d", bars_per_year=252.0),
    # CME Euro FX: 125,000 EUR, 0.00005 tick.
    "6E": InstrumentSpec("6E", 0.00005, 125_000.0, 2.50, 2_750.0, 2_500.0, bar_frequency="1h", bars_per_year=252.0 * 24),
    # Generic cash equity / index: one unit per contract, cent ticks.
    "EQUITY": InstrumentSpec("EQUITY", 0.01, 1.0, 0.0, 0.0, 0.0, bar_frequency="1d", bars_per_year=252.0),
    # Generic spot FX: 100,000 base units, pip/10 ticks.
    "FX": InstrumentSpec("FX", 0.00001, 100_000.0, 2.0, 2_000.0, 2_000.0, bar_frequency="1h", bars_per_year=252.0 * 24),
}


def preset(name: str) -> InstrumentSpec:
    """Look up an instrument preset by symbol (case-insensitive)."""
    try:
        return PRESETS[name.upper()]
    except KeyError:
        raise KeyError(f"unknown instrument preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None
