"""Named datasets: the bundled real series and the synthetic generators.

``foxhunt datasets list`` prints :func:`list_datasets`. Bundled files live in
``foxhunt/data/bundled`` (package data); their origin is in ``SOURCES.md`` there.
Each bundled dataset names the instrument economics it is traded with.
"""

from __future__ import annotations

import functools
from importlib import resources

import attrs
from foxhunt.data.instrument import InstrumentSpec, preset
from foxhunt.data.market import MarketData
from foxhunt.data.synthetic import KINDS, PREFIX, generate, parse_spec
from foxhunt.data.tabular import load_csv
from foxhunt.errors import DataError

__all__ = [
    "DEFAULT_DATASET",
    "BUNDLED",
    "LEARNING_SUITE",
    "DatasetInfo",
    "BundledDataset",
    "list_datasets",
    "load_bundled",
    "bundled_path",
]

DEFAULT_DATASET = "eurusd-1h-2017"

# The synthetic markets of the learning benchmark (benchmarks/learning.py), each with an oracle under the
# env physics (foxhunt.env.oracle). Hourly FX-like bars; 5,000 bars hold the default walk-forward folds.
# AR(1) strengths start at 0.1: weaker signals have oracle Sharpes (about 2.5 at phi = 0.05) below the
# sampling error of an annualised Sharpe over the default 3 x 500 evaluation bars (about 2.4), so an
# agent/oracle ratio there would measure noise. A seed is added per run.
LEARNING_SUITE: dict[str, str] = {
    "ar1-weak": "synthetic:ar1?phi=0.1&bars=5000",
    "ar1-medium": "synthetic:ar1?phi=0.2&bars=5000",
    "ar1-strong": "synthetic:ar1?phi=0.3&bars=5000",
    "meanrev": "synthetic:meanrev?kappa=0.01&bars=5000",
    "trend": "synthetic:trend?drift=0.15&stay=0.995&bars=5000",
    "randomwalk": "synthetic:randomwalk?bars=5000",
}


@attrs.frozen
class BundledDataset:
    name: str
    filename: str
    description: str
    preset: str  # instrument economics
    symbol: str


BUNDLED: dict[str, BundledDataset] = {
    ds.name: ds
    for ds in (
        BundledDataset(
            "eurusd-1h-2017",
            "eurusd_1h_2017.csv.gz",
            "EUR/USD spot, hourly bars, 2017 (Dukascopy-style export, UTC)",
            "FX",
            "EURUSD",
        ),
        BundledDataset(
            "sp500-1d-1999-2018",
            "sp500_daily_1999_2018.csv.gz",
            "S&P 500 index (^GSPC), daily bars 1999-2018 (Yahoo Finance-style export), traded with E-mini (ES) economics",
            "ES",
            "SPX",
        ),
    )
}


@attrs.frozen
class DatasetInfo:
    """One row of ``foxhunt datasets list``."""

    name: str
    kind: str  # "bundled", "synthetic" (a generator at its defaults) or "suite" (a learning-suite market)
    description: str
    bars: int
    start: str
    end: str
    instrument: str
    bar_frequency: str


def bundled_path(name: str) -> str:
    """Filesystem path of a bundled dataset's file."""
    entry = _entry(name)
    return str(resources.files("foxhunt.data").joinpath("bundled", entry.filename))


def _entry(name: str) -> BundledDataset:
    try:
        return BUNDLED[name]
    except KeyError:
        known = ", ".join([*BUNDLED, *(PREFIX + kind for kind in KINDS)])
        raise DataError(f"unknown dataset {name!r}; known datasets: {known}. Run `foxhunt datasets list` for details") from None


@functools.cache
def _load_cached(name: str) -> MarketData:
    entry = _entry(name)
    # The preset's economics; bar frequency and bars per year are measured from the file.
    raw = load_csv(bundled_path(name), instrument=entry.preset)
    return attrs.evolve(
        raw,
        source=name,
        instrument=attrs.evolve(raw.instrument, symbol=entry.symbol),
        report=raw.report.with_note(f"bundled dataset {name} ({entry.filename}), traded as {entry.symbol}"),
    )


def load_bundled(name: str, instrument: InstrumentSpec | str | None = None) -> MarketData:
    """A bundled dataset; ``instrument`` (spec or preset name) overrides its default economics."""
    market = _load_cached(name)
    if instrument is None:
        return market
    if isinstance(instrument, InstrumentSpec):
        return attrs.evolve(market, instrument=instrument)
    try:
        base = preset(instrument)
    except KeyError as error:
        raise DataError(str(error.args[0])) from None
    measured = {"bar_frequency": market.instrument.bar_frequency, "bars_per_year": market.instrument.bars_per_year}
    return attrs.evolve(market, instrument=attrs.evolve(base, **measured))


def list_datasets() -> list[DatasetInfo]:
    """Every named dataset: bundled ones first, then the synthetic generators at their default size."""
    rows = []
    for name, entry in BUNDLED.items():
        market = load_bundled(name)
        rows.append(_info(name, "bundled", entry.description, market))
    descriptions = {
        "planted": "planted EMA-momentum signal with a known optimal policy and Sharpe (learning-quality tests)",
        "regime": "Markov regime switching between bull, bear and sideways drift/volatility",
        "ar1": "AR(1) momentum in hourly log returns (phi), FX-like costs",
        "meanrev": "mean reversion: Ornstein-Uhlenbeck log price around its first close (kappa), FX-like costs",
        "trend": "regime-switching trend: hidden up/down drift (drift, stay), FX-like costs",
        "randomwalk": "driftless random walk: nothing to learn, the oracle stays flat",
    }
    for kind in KINDS:
        market = generate(parse_spec(PREFIX + kind))
        rows.append(_info(PREFIX + kind, "synthetic", descriptions[kind], market))
    for name, source in LEARNING_SUITE.items():
        market = generate(parse_spec(source))
        rows.append(_info(source, "suite", f"learning suite market {name!r}, with its oracle (benchmarks/learning.py)", market))
    return rows


def _info(name: str, kind: str, description: str, market: MarketData) -> DatasetInfo:
    return DatasetInfo(
        name=name,
        kind=kind,
        description=description,
        bars=len(market),
        start=str(market.start.astype("datetime64[s]")),
        end=str(market.end.astype("datetime64[s]")),
        instrument=market.instrument.symbol,
        bar_frequency=market.instrument.bar_frequency,
    )
