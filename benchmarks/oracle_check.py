"""How close the suite's oracle is to the best threshold policy under foxhunt's own physics.

    python benchmarks/oracle_check.py                                   # ar1-weak and ar1-medium, 20 000 bars
    python benchmarks/oracle_check.py --datasets meanrev trend --bars 10000 --thresholds 1 1.5 2 3

The oracle (``foxhunt.env.oracle``) picks its threshold ``k`` and band on a unit position's Sharpe over a
calibration path, and sends FULL PASSIVE market orders. The agent trades through the environment, which also
takes limit orders and caps positions (Kelly, margin). This script draws one market of each model from a seed
of its own (neither the calibration path nor an evaluated market) and backtests every (k, band) of the grid
through :func:`foxhunt.env.oracle.actions_backtest` four ways: market orders at PASSIVE urgency where the target
changes (the oracle's own orders: its row reproduces ``oracle_backtest``), and limit orders at each urgency,
re-posted every bar until the target is reached. It prints each model's grid, then per model the oracle's
Sharpe beside the best market-order and the best limit-order policy of the grid: how far agent/oracle can
overstate what the physics allows a threshold rule.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import parse_qsl, urlencode

import numpy as np
import torch

from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
from foxhunt.data import LEARNING_SUITE
from foxhunt.data.synthetic import conditional_mean, generate, spec_of
from foxhunt.env.config import EnvConfig
from foxhunt.env.oracle import (BANDS, actions_backtest, oracle_orders, oracle_policy, relative_cost,
                                threshold_targets)

ORDERS = (("market PASSIVE", OrderType.MARKET, Urgency.PASSIVE), ("limit PASSIVE", OrderType.LIMIT, Urgency.PASSIVE),
          ("limit NORMAL", OrderType.LIMIT, Urgency.NORMAL), ("limit AGGRESSIVE", OrderType.LIMIT, Urgency.AGGRESSIVE))
THRESHOLDS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)


def limit_orders(targets: np.ndarray, urgency: Urgency) -> torch.Tensor:
    """Actions ``[bars, Branch]``: the target's direction as a FULL limit order at ``urgency`` on every bar, so an
    order that did not fill is posted again (one already at its target trades nothing)."""
    direction = np.where(targets > 0, int(Direction.LONG), np.where(targets < 0, int(Direction.SHORT),
                                                                    int(Direction.FLAT)))
    actions = torch.zeros((len(targets), Branch.size()), dtype=torch.int64)
    actions[:, Branch.DIRECTION] = torch.from_numpy(direction.astype(np.int64))
    actions[:, Branch.MAGNITUDE] = Magnitude.FULL
    actions[:, Branch.ORDER_TYPE] = OrderType.LIMIT
    actions[:, Branch.URGENCY] = urgency
    return actions


def drawn_source(name: str, bars: int, seed: int) -> str:
    """The suite market ``name``'s source with its length and seed replaced."""
    scheme, _, query = LEARNING_SUITE[name].partition("?")
    parameters = {**dict(parse_qsl(query)), "bars": str(bars), "seed": str(seed)}
    return f"{scheme}?{urlencode(parameters)}"


def check_model(source: str, config: EnvConfig, thresholds: tuple[float, ...]) -> dict[str, Any]:
    """Every (k, band) of the grid under each kind of order on ``source``; the oracle's own choice among them."""
    market = generate(source)
    mean = conditional_mean(spec_of(market), market.close)
    cost = relative_cost(market.close, market.instrument, config)
    chosen = oracle_policy(market, config)
    grid = sorted({*thresholds, chosen.threshold})
    rows = []
    for k in grid:
        for band in BANDS:
            targets = threshold_targets(mean, cost, k, band == "hold", 0.0)
            sharpes = [actions_backtest(market, oracle_orders(targets) if kind == OrderType.MARKET
                                        else limit_orders(targets, urgency), config).sharpe
                       for _, kind, urgency in ORDERS]
            rows.append({"k": k, "band": band, "sharpes": sharpes})
            print(f"# {source}: k={k:g} {band} done", file=sys.stderr, flush=True)
    oracle = next(row for row in rows if row["k"] == chosen.threshold and row["band"] == chosen.band)
    return {"source": source, "oracle": (chosen.threshold, chosen.band), "oracle_sharpe": oracle["sharpes"][0],
            "rows": rows}


def best(rows: list[dict[str, Any]], columns: range) -> tuple[str, float]:
    """The grid's best cell among ``columns``: a label (order, k, band) and its Sharpe."""
    cells = [(row["sharpes"][c], ORDERS[c][0], row["k"], row["band"]) for row in rows for c in columns]
    sharpe, order, k, band = max(cells)
    return f"{order}, k={k:g}, {band}", sharpe


def grid_table(result: dict[str, Any]) -> list[str]:
    k, band = result["oracle"]
    lines = [f"## {result['source']} (the oracle: k={k:g}, {band}, marked *)", "",
             "| k | band | " + " | ".join(name for name, _, _ in ORDERS) + " |",
             "|---:|---|" + "---:|" * len(ORDERS)]
    for row in result["rows"]:
        mark = "*" if (row["k"], row["band"]) == result["oracle"] else ""
        cells = " | ".join(f"{sharpe:+.2f}" for sharpe in row["sharpes"])
        lines.append(f"| {row['k']:g}{mark} | {row['band']} | {cells} |")
    return lines


def summary_table(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| dataset | oracle (k, band) | oracle Sharpe | best market order | best limit order | best / oracle |",
             "|---|---|---:|---|---|---:|"]
    for name, result in results.items():
        k, band = result["oracle"]
        market_label, market_sharpe = best(result["rows"], range(0, 1))
        limit_label, limit_sharpe = best(result["rows"], range(1, len(ORDERS)))
        top = max(market_sharpe, limit_sharpe)
        ratio = f"{top / result['oracle_sharpe']:.2f}" if result["oracle_sharpe"] > 0 else "-"
        lines.append(f"| {name} | {k:g}, {band} | {result['oracle_sharpe']:+.2f} | "
                     f"{market_label}: {market_sharpe:+.2f} | {limit_label}: {limit_sharpe:+.2f} | {ratio} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    signal_markets = [name for name in LEARNING_SUITE if name != "randomwalk"]
    parser.add_argument("--datasets", nargs="+", default=["ar1-weak", "ar1-medium"], choices=signal_markets,
                        help="suite markets to check (the random walk's oracle never trades)")
    parser.add_argument("--bars", type=int, default=20_000, help="bars of each drawn market")
    parser.add_argument("--seed", type=int, default=7, help="the drawn markets' seed")
    parser.add_argument("--thresholds", type=float, nargs="+", default=THRESHOLDS,
                        help="multiples k of the one-way cost in the grid (the oracle's own is always added)")
    args = parser.parse_args(argv)
    if args.bars < 100:
        parser.error(f"--bars {args.bars}: a backtest needs at least 100 bars to read a Sharpe")
    config = EnvConfig()
    results = {}
    for name in args.datasets:
        results[name] = check_model(drawn_source(name, args.bars, args.seed), config, tuple(args.thresholds))
        print("\n".join(grid_table(results[name])) + "\n", flush=True)
    print("\n".join(summary_table(results)))


if __name__ == "__main__":
    main()
