"""One entry point from a source string to :class:`MarketData`.

A source is resolved in this order: a ``synthetic:`` spec, a bundled dataset name,
then a file path whose extension picks the reader (.csv, .txt, .tsv, each maybe
.gz; .parquet/.pq; .dbn, .dbn.zst).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from foxhunt.data.bars import check_bar_settings, volume_bars
from foxhunt.data.catalog import BUNDLED, load_bundled
from foxhunt.data.config import DataConfig
from foxhunt.data.dbn import load_dbn
from foxhunt.data.instrument import InstrumentSpec
from foxhunt.data.market import MarketData
from foxhunt.data.synthetic import KINDS, PREFIX, generate
from foxhunt.data.tabular import load_csv, load_parquet
from foxhunt.errors import DataError

__all__ = ["EXTENSIONS", "TEXT_EXTENSIONS", "load", "load_from_config"]

# Text files: MetaTrader writes .csv or .txt, tab-separated exports are often .tsv.
TEXT_EXTENSIONS = (".csv", ".csv.gz", ".txt", ".txt.gz", ".tsv", ".tsv.gz")
EXTENSIONS = (*TEXT_EXTENSIONS, ".parquet", ".pq", ".dbn", ".dbn.zst")


def load(
    source: str,
    instrument: InstrumentSpec | str | None = None,
    *,
    columns: Mapping[str, str | None] | None = None,
    timezone: str = "UTC",
    timestamp_format: str | None = None,
    duplicates: str = "error",
    bar: str = "1m",
    missing: str = "drop_empty",
    delimiter: str | None = None,
    decimal: str | None = None,
    instrument_id: int | None = None,
    bars: str = "time",
    volume_per_bar: float | None = None,
) -> MarketData:
    """Load a bundled dataset, a synthetic spec or a file. Keyword options apply to files only
    (``bar`` and ``instrument_id`` to DBN; ``delimiter`` and ``decimal`` to CSV; the rest to CSV and Parquet),
    except ``bars`` and ``volume_per_bar``: ``bars="volume"`` re-samples any source into volume bars
    (:mod:`foxhunt.data.bars`)."""
    try:
        check_bar_settings(bars, volume_per_bar)
    except ValueError as error:
        raise DataError(f"{source}: {error}") from None
    market = _load_source(source, instrument, columns=columns, timezone=timezone, timestamp_format=timestamp_format,
                          duplicates=duplicates, bar=bar, missing=missing, delimiter=delimiter, decimal=decimal,
                          instrument_id=instrument_id)
    return market if bars == "time" else volume_bars(market, volume_per_bar)


def _load_source(
    source: str,
    instrument: InstrumentSpec | str | None,
    *,
    columns: Mapping[str, str | None] | None,
    timezone: str,
    timestamp_format: str | None,
    duplicates: str,
    bar: str,
    missing: str,
    delimiter: str | None,
    decimal: str | None,
    instrument_id: int | None,
) -> MarketData:
    """The source's own bars (``load`` without the re-sampling)."""
    if source.startswith(PREFIX):
        return generate(source, instrument)
    if source in BUNDLED:
        return load_bundled(source, instrument)
    name = Path(source).name.lower()
    tabular = {
        "columns": columns, "timezone": timezone, "timestamp_format": timestamp_format, "instrument": instrument,
        "duplicates": duplicates, "missing": missing,
    }
    if name.endswith(TEXT_EXTENSIONS):
        return load_csv(source, **tabular, delimiter=delimiter, decimal=decimal)
    if name.endswith((".parquet", ".pq")):
        return load_parquet(source, **tabular)
    if name.endswith((".dbn", ".dbn.zst")):
        return load_dbn(source, bar=bar, instrument=instrument, instrument_id=instrument_id)
    raise DataError(
        f"{source}: not a dataset name, a synthetic spec or a file with a known extension. "
        f"Datasets: {', '.join(BUNDLED)}; synthetic: {', '.join(repr(PREFIX + kind + '?...') for kind in KINDS)}; "
        f"file extensions: {', '.join(EXTENSIONS)}"
    )


def load_from_config(config: DataConfig) -> MarketData:
    """``load`` with every option taken from a :class:`DataConfig`."""
    return load(
        config.source,
        config.instrument,
        columns=config.columns or None,
        timezone=config.timezone,
        timestamp_format=config.timestamp_format,
        duplicates=config.duplicates,
        bar=config.bar,
        missing=config.missing,
        delimiter=config.delimiter,
        decimal=config.decimal,
        instrument_id=config.instrument_id,
        bars=config.bars,
        volume_per_bar=config.volume_per_bar,
    )
