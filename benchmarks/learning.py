"""Learning-quality benchmark: out-of-sample results of `foxhunt train` across datasets and seeds.

    python benchmarks/learning.py                      # CPU, 3 seeds, every dataset (about half an hour on 2 cores)
    python benchmarks/learning.py --quick              # 2 seeds, the planted market and EUR/USD only
    python benchmarks/learning.py --device cuda        # on a GPU

Prints one row per dataset: the agent's out-of-sample Sharpe after costs over
every fold's validation window (mean and spread over seeds), against the
oracle (planted market: the known-optimal policy on the same validation bars)
and buy-and-hold, with wall time, env steps/s and updates/s.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import logging

import numpy as np
import structlog
import torch

from foxhunt.config import load_config
from foxhunt.data import load, oracle_positions
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

DATASETS = {
    "planted": "synthetic:planted?bars=5000&seed=1",
    "eurusd": "eurusd-1h-2017",
    "sp500": "sp500-1d-1999-2018",
}


def oracle_validation_sharpe(source: str, windows: list[list[int]]) -> float:
    """Sharpe after costs of the planted market's optimal unit policy over exactly the validation bars."""
    market = load(source)
    positions = oracle_positions(market)
    close = market.close
    returns = np.r_[0.0, np.diff(np.log(close))]
    spec = market.instrument
    cost = (spec.spread_ticks * spec.tick_size / 2.0) / close + spec.commission / (close * spec.multiplier)
    pnl = []
    for start, stop in windows:
        p = positions[start:stop]
        traded = np.abs(np.diff(np.r_[0.0, p]))
        pnl.append(p * returns[start:stop] - np.r_[cost[start - 1], cost[start : stop - 1]] * traded)
    series = np.concatenate(pnl)
    return float(series.mean() / series.std() * math.sqrt(spec.bars_per_year))


def run_once(source: str, seed: int, device: str, overrides: list[str]) -> dict:
    config = load_config(None, [f'data.source="{source}"', f"run.seed={seed}", f"run.device={device}", *overrides])
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = RunDirectory(Path(tmp) / "run")
        started = time.perf_counter()
        summary = Trainer(config, run_dir, show_progress=False).run()
        wall = time.perf_counter() - started
        rows = [json.loads(line) for line in run_dir.metrics_path.read_text().splitlines()]
    return {
        "sharpe": summary["overall"]["agent"]["sharpe"],
        "buy_and_hold": summary["overall"]["buy_and_hold"]["sharpe"],
        "windows": [fold["validation"] for fold in summary["folds"]],
        "wall": wall,
        "env_steps_per_s": statistics.mean(r["env_steps_per_s"] for r in rows),
        "updates_per_s": statistics.mean(r["updates_per_s"] for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2 seeds, planted and eurusd only")
    parser.add_argument("--datasets", nargs="*", default=None, choices=sorted(DATASETS))
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="extra config override")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads, as `foxhunt train` sets them")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # A benchmark is a program, so it may configure logging: keep the table readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    names = args.datasets or (["planted", "eurusd"] if args.quick else list(DATASETS))
    seeds = range(2 if args.quick else args.seeds)
    print("| dataset | device | seeds | agent OOS Sharpe (mean ± sd) | oracle | buy & hold | wall s/run | env steps/s | updates/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        source = DATASETS[name]
        runs = [run_once(source, seed, args.device, args.overrides) for seed in seeds]
        sharpes = [r["sharpe"] for r in runs]
        spread = statistics.stdev(sharpes) if len(sharpes) > 1 else 0.0
        oracle = f"{oracle_validation_sharpe(source, runs[0]['windows']):.2f}" if name == "planted" else "-"
        print(
            f"| {name} | {args.device} | {len(runs)} | {statistics.mean(sharpes):+.2f} ± {spread:.2f} | {oracle} | "
            f"{runs[0]['buy_and_hold']:+.2f} | {statistics.mean(r['wall'] for r in runs):.0f} | "
            f"{statistics.mean(r['env_steps_per_s'] for r in runs):,.0f} | {statistics.mean(r['updates_per_s'] for r in runs):,.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
