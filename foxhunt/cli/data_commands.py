"""``foxhunt data``: load a data source the way a run would, and show what was read, without training."""

from __future__ import annotations

import json
from pathlib import Path

import click

from foxhunt.cli.common import config_options, echo_json, resolve_config
from foxhunt.data import MarketData, load_from_config

__all__ = ["data_group"]


@click.group("data")
def data_group() -> None:
    """Look at market data before training on it."""


def _lines(market: MarketData) -> list[str]:
    bars = len(market)
    lines = [f"source: {market.source}", f"bars: {bars}, {market.start} to {market.end} (UTC, each bar's open)"]
    lines += market.report.describe()
    lines.append(f"instrument: {market.instrument.symbol}, {market.instrument.bars_per_year:.1f} bars/year")
    return lines


def _as_json(market: MarketData) -> dict:
    report = market.report
    return {
        "source": market.source,
        "bars": len(market),
        "start": str(market.start),
        "end": str(market.end),
        "layout": report.layout,
        "columns": dict(report.columns),
        "timestamps": report.timestamps,
        "frequency": report.frequency,
        "rows_read": report.rows_read,
        "missing_dropped": list(report.missing_dropped),
        "duplicates_dropped": list(report.duplicates_dropped),
        "gaps": [{"after": gap.after, "previous": str(gap.previous), "next": str(gap.next),
                  "missing_bars": gap.missing_bars} for gap in report.gaps],
        "closures": report.closures,
        "notes": list(report.notes),
        "instrument": market.instrument.symbol,
    }


@data_group.command("inspect")
@click.argument("source", metavar="FILE")
@config_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object instead of lines.")
def data_inspect(source: str, config_path: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Load FILE exactly as `foxhunt train --data FILE` would, and print the load report.

    The report says which layout was recognised, which column plays which role,
    how times were read and in which time zone, the bar frequency, gaps, and
    every row dropped and why. Nothing is trained or written. FILE may also be
    a bundled dataset name or a synthetic spec. A file foxhunt cannot read
    without help is one error naming the `--set data.…` keys to pass; pass them
    here until the report is right, then give the same to `foxhunt train`.

    \b
    Examples:
      foxhunt data inspect prices.csv
      foxhunt data inspect SP500.csv                # FRED: DATE,SP500 with '.' on holidays
      foxhunt data inspect EURUSD60.csv             # MetaTrader: no header, tab-separated
      foxhunt data inspect BTCUSDT-1h-2024-01.csv   # Binance klines, epoch milliseconds
      foxhunt data inspect bars.csv --set data.timezone=America/New_York
      foxhunt data inspect bars.csv --set 'data.timestamp_format="%d/%m/%Y %H:%M"'
      foxhunt data inspect AAPL.csv --set 'data.columns={close="Adj Close"}'
      foxhunt data inspect export.csv --set 'data.delimiter=";"' --set 'data.decimal=","'
      foxhunt data inspect quotes.csv --set 'data.missing="drop"' --json

    \b
    Recognised without settings (docs/data.md, "Layouts"): a header with the
    usual names (any case), pandas' unnamed index column, banner and # lines
    above the header, comma / semicolon / tab / '|' separators, decimal
    commas, Yahoo Finance, MetaTrader, Binance klines, close-only series,
    epoch seconds / milliseconds, UTC offsets and 'Z'.
    """
    extra = [*overrides, f"data.source={json.dumps(source)}"]
    config = resolve_config(config_path, tuple(extra))
    market = load_from_config(config.data)
    if as_json:
        echo_json(_as_json(market))
        return
    for line in _lines(market):
        click.echo(line)
