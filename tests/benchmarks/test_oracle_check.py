"""benchmarks/oracle_check.py: the oracle beside the best threshold policies of its grid, through the physics.

The script's market-order column at the oracle's own (k, band) must be the oracle's backtest itself, its limit
orders must be re-posted until they fill, and it runs as a user runs it, printing both tables."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from foxhunt.actions import Branch, Direction, OrderType, Urgency
from foxhunt.data.synthetic import generate
from foxhunt.env.config import EnvConfig
from foxhunt.env.oracle import oracle_backtest
from tests.benchmark_scripts import BENCHMARKS, load_script


def test_the_drawn_market_is_the_suite_model_at_its_own_length_and_seed() -> None:
    script = load_script("oracle_check")
    source = script.drawn_source("trend", 1200, 9)
    assert source.startswith("synthetic:trend?")
    assert "drift=0.15" in source and "stay=0.995" in source and "bars=1200" in source and "seed=9" in source
    assert len(generate(source)) == 1200


def test_limit_orders_repost_the_target_every_bar() -> None:
    script = load_script("oracle_check")
    actions = script.limit_orders(np.array([0.0, 1.0, 1.0, -1.0, 0.0]), Urgency.NORMAL)
    assert actions[:, Branch.DIRECTION].tolist() == [Direction.FLAT, Direction.LONG, Direction.LONG,
                                                     Direction.SHORT, Direction.FLAT]
    assert (actions[:, Branch.ORDER_TYPE] == OrderType.LIMIT).all()
    assert (actions[:, Branch.URGENCY] == Urgency.NORMAL).all()


def test_the_oracle_row_is_the_oracle_backtest() -> None:
    script = load_script("oracle_check")
    source = script.drawn_source("ar1-medium", 600, 3)
    result = script.check_model(source, EnvConfig(), (1.0,))
    assert result["oracle"] == (4.0, "flat")  # the calibrated choice for phi = 0.2 (docs/data.md, the suite)
    assert {(row["k"], row["band"]) for row in result["rows"]} == {(1.0, "hold"), (1.0, "flat"), (4.0, "hold"),
                                                                    (4.0, "flat")}
    assert result["oracle_sharpe"] == pytest.approx(oracle_backtest(generate(source), EnvConfig()).sharpe, abs=1e-12)
    # a limit order fills on fewer bars than a market order and pays no spread: the columns are different policies
    oracle_row = next(row for row in result["rows"] if (row["k"], row["band"]) == (4.0, "flat"))
    assert len(set(oracle_row["sharpes"])) > 1


def test_the_script_prints_each_grid_and_the_summary() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "oracle_check.py"), "--datasets", "ar1-medium",
                           "--bars", "500", "--thresholds", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "## synthetic:ar1?phi=0.2&bars=500&seed=7 (the oracle: k=4, flat, marked *)"
    assert sum(line.startswith("| 4* | flat |") for line in lines) == 1
    summary = [line for line in lines if line.startswith("| ar1-medium |")]
    assert len(summary) == 1
    cells = [cell.strip() for cell in summary[0].strip("|").split("|")]
    assert cells[1] == "4, flat"
    assert float(cells[5]) >= 1.0  # the best of a grid holding the oracle's own row is never below it


def test_too_short_a_market_is_refused() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "oracle_check.py"), "--bars", "50"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--bars 50: a backtest needs at least 100 bars" in done.stderr
