"""Market data: sources, validation, the immutable :class:`MarketData`, named datasets.

Everything a run needs to turn a source string into validated bars::

    market = load("eurusd-1h-2017")                       # bundled
    market = load("synthetic:planted?bars=5000&seed=1")   # generated
    market = load("prices.csv", "ES", timezone="America/Chicago")
"""

from __future__ import annotations

from foxhunt.data.bars import volume_bars
from foxhunt.data.catalog import DEFAULT_DATASET, LEARNING_SUITE, DatasetInfo, list_datasets, load_bundled
from foxhunt.data.config import DataConfig
from foxhunt.data.dbn import load_dbn, order_flow_imbalance
from foxhunt.data.instrument import PRESETS, InstrumentSpec, preset
from foxhunt.data.load import load, load_from_config
from foxhunt.data.market import BOOK, BOOK_LEVELS, FLOW, LEVEL, OHLCV, DataReport, Gap, MarketData
from foxhunt.data.synthetic import (
    Regime,
    SyntheticSpec,
    Trend,
    generate,
    market_conditional_mean,
    oracle_positions,
    oracle_sharpe,
    parse_spec,
    planted_sharpe,
    regime_states,
    trend_states,
)
from foxhunt.data.tabular import load_csv, load_parquet

__all__ = [
    "BOOK",
    "BOOK_LEVELS",
    "DEFAULT_DATASET",
    "DataConfig",
    "DataReport",
    "DatasetInfo",
    "FLOW",
    "Gap",
    "InstrumentSpec",
    "LEVEL",
    "LEARNING_SUITE",
    "MarketData",
    "OHLCV",
    "PRESETS",
    "Regime",
    "SyntheticSpec",
    "Trend",
    "generate",
    "list_datasets",
    "load",
    "load_bundled",
    "load_csv",
    "load_dbn",
    "order_flow_imbalance",
    "load_from_config",
    "load_parquet",
    "market_conditional_mean",
    "oracle_positions",
    "oracle_sharpe",
    "parse_spec",
    "planted_sharpe",
    "preset",
    "regime_states",
    "trend_states",
    "volume_bars",
]
