"""The bundled real datasets: verified sizes and dates, clean features, buy-and-hold from the raw text."""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from foxhunt.data import DEFAULT_DATASET, DataConfig, list_datasets, load, load_from_config
from foxhunt.data.catalog import bundled_path
from foxhunt.features import compute_features

# (name, rows, first bar, last bar, time format, raw file) -- counted from the raw files.
BUNDLED = [
    ("eurusd-1h-2017", 6225, "2017-01-01T22:00", "2017-12-29T21:00", "%d.%m.%Y %H:%M:%S.%f", "eurusd_1h_2017.csv.gz"),
    ("sp500-1d-1999-2018", 5031, "1999-01-04", "2018-12-31", "%m/%d/%Y", "sp500_daily_1999_2018.csv.gz"),
]


def raw_rows(filename: str) -> list[list[str]]:
    with gzip.open(bundled_path_for(filename), "rt", newline="") as handle:
        return list(csv.reader(handle))


def bundled_path_for(filename: str) -> str:
    name = {"eurusd_1h_2017.csv.gz": "eurusd-1h-2017", "sp500_daily_1999_2018.csv.gz": "sp500-1d-1999-2018"}[filename]
    return bundled_path(name)


@pytest.mark.parametrize(("name", "rows", "first", "last", "fmt", "filename"), BUNDLED)
def test_bundled_dataset_loads_with_verified_size_and_dates(name, rows, first, last, fmt, filename):
    market = load(name)
    assert len(market) == rows
    assert market.start == np.datetime64(first, "ns")
    assert market.end == np.datetime64(last, "ns")
    text = raw_rows(filename)
    assert len(text) - 1 == rows
    assert dt.datetime.strptime(text[1][0], fmt) == market.start.astype("datetime64[us]").astype(dt.datetime)


@pytest.mark.parametrize(("name", "rows", "first", "last", "fmt", "filename"), BUNDLED)
def test_buy_and_hold_matches_the_raw_csv_text(name, rows, first, last, fmt, filename):
    text = raw_rows(filename)
    header = [h.strip().lower() for h in text[0]]
    close = header.index("close")  # the raw close, never "adj close"
    expected = float(text[-1][close]) / float(text[1][close]) - 1.0
    market = load(name)
    assert market.close[-1] / market.close[0] - 1.0 == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", [b[0] for b in BUNDLED])
def test_bundled_features_have_no_nan_after_warmup(name):
    features = compute_features(load(name))
    assert features.warmup > 0
    assert np.isfinite(features.values[features.warmup:]).all()
    assert np.isnan(features.values[: features.warmup]).any()


def test_bundled_text_matches_the_checksums_recorded_in_sources_md():
    sources = (Path(bundled_path("eurusd-1h-2017")).parent / "SOURCES.md").read_text()
    for name, *_ in BUNDLED:
        digest = hashlib.sha256(gzip.decompress(Path(bundled_path(name)).read_bytes())).hexdigest()
        assert digest in sources, f"{name}: CSV text sha256 {digest} is not the one recorded in SOURCES.md"


def test_known_gaps_are_reported():
    eurusd = load("eurusd-1h-2017")
    assert [(str(g.previous)[:13], g.missing_bars) for g in eurusd.report.gaps] == [("2017-12-25T07", 14)]
    assert eurusd.report.closures == 51  # weekends, each excused by the weekend rule
    sp500 = load("sp500-1d-1999-2018")
    starts = [str(g.previous)[:10] for g in sp500.report.gaps]
    assert starts == ["2001-09-10", "2006-12-29", "2012-10-26"]  # 9/11, Ford funeral + New Year, Hurricane Sandy


def test_bundled_instruments_and_bars_per_year():
    eurusd = load("eurusd-1h-2017")
    assert eurusd.instrument.symbol == "EURUSD" and eurusd.instrument.bar_frequency == "1h"
    span_years = (eurusd.end - eurusd.start) / np.timedelta64(1, "D") / 365.25
    assert eurusd.instrument.bars_per_year == pytest.approx((len(eurusd) - 1) / span_years)
    assert 6000 < eurusd.instrument.bars_per_year < 6400
    sp500 = load("sp500-1d-1999-2018")
    assert sp500.instrument.multiplier == 50.0 and sp500.instrument.bar_frequency == "1d"
    assert 250 < sp500.instrument.bars_per_year < 253


def test_catalog_and_default_dataset():
    rows = {info.name: info for info in list_datasets()}
    assert DEFAULT_DATASET == DataConfig().source == "eurusd-1h-2017"
    assert rows["eurusd-1h-2017"].bars == 6225 and rows["eurusd-1h-2017"].kind == "bundled"
    assert rows["sp500-1d-1999-2018"].start.startswith("1999-01-04")
    assert rows["synthetic:planted"].kind == "synthetic"
    assert len(load_from_config(DataConfig())) == 6225
    assert load("eurusd-1h-2017", "6E").instrument.symbol == "6E"
    assert math.isfinite(load("sp500-1d-1999-2018").close.sum())


def test_unknown_names_are_data_errors():
    from foxhunt.errors import DataError

    with pytest.raises(DataError, match="unknown instrument preset 'ZZ'"):
        load("eurusd-1h-2017", "ZZ")
    with pytest.raises(DataError, match="unknown instrument preset 'ZZ'"):
        load("synthetic:planted?bars=100", "ZZ")
