"""The main job, measured: `foxhunt train` with its device profile on a planted market, end to end.

    python benchmarks/train.py --device cuda              # one H200: the GPU profile
    python benchmarks/train.py --device cpu --epochs 1    # the CPU profile, for comparison

Runs `foxhunt train` as a user would (a subprocess, its own run directory) and
reads the run's metrics.jsonl, one row per epoch. Prints per epoch: env steps/s
with the policy in the loop (collection and learning together), updates/s,
wall seconds of the epoch's training and of its validation backtest, then the
run's time to the first update (start-up, data, compile and graph capture
included), peak device memory and the total wall time.

A second table measures collection alone (act, explore, env step, replay
insert: the captured ``collect`` half of the step) at several env counts, with
the same code the trainer runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import structlog
import torch

from foxhunt.config import load_config
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

DATA = "synthetic:planted?bars=20000&seed=1"


def run_main_job(device: str, epochs: int, extra: list[str], out: Path) -> tuple[list[dict], float]:
    command = [
        sys.executable, "-m", "foxhunt.cli.main", "train", "--data", DATA, "--device", device, "--no-progress",
        "--out", str(out), "--set", f"train.epochs={epochs}", "--set", "folds.n_folds=1",
        *[arg for override in extra for arg in ("--set", override)],
    ]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"foxhunt train failed ({done.returncode}):\n{done.stderr[-4000:]}")
    wall = time.perf_counter() - started
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows, wall


def collection_rate(device: str, n_envs: int, steps: int) -> float:
    """Env steps/s of the collect half alone (graph-replayed on CUDA), after its warm-up and capture."""
    overrides = [f'run.device="{device}"', f'data.source="{DATA}"', f"env.n_envs={n_envs}",
                 f"learner.replay.capacity={max(1 << 20, 4 * n_envs)}", "folds.n_folds=1"]
    config = load_config(None, overrides)
    with tempfile.TemporaryDirectory() as directory:
        trainer = Trainer(config, RunDirectory(Path(directory)), show_progress=False)
        trainer._build()
        trainer._start_fold(trainer.data.folds[0])
        for _ in range(10):  # warm-up, capture and a few replays
            trainer.graphs.collect()
        trainer._sync()
        started = time.perf_counter()
        for _ in range(steps):
            trainer.graphs.collect()
        trainer._sync()
        return steps * n_envs / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                        help="extra config override for the main job (repeatable)")
    parser.add_argument("--collect-envs", default="4096,65536,1048576",
                        help="comma-separated env counts for the collection-only table ('' to skip)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    with tempfile.TemporaryDirectory() as directory:
        rows, wall = run_main_job(args.device, args.epochs, args.extra, Path(directory) / "run")
    print(f"## foxhunt train --device {args.device} --data '{DATA}' (profile defaults, {args.epochs} epochs, 1 fold)")
    print()
    print("| epoch | env steps/s (policy in loop) | updates/s | updates | train s | validation s | val Sharpe |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['epoch']} | {row['env_steps_per_s']:.3g} | {row['updates_per_s']:.1f} | {row['updates']} | "
              f"{row['seconds']:.2f} | {row['validation_seconds']:.2f} | {row['validation']['sharpe']:+.2f} |")
    last = rows[-1]
    peak = last["peak_device_memory_bytes"]
    print()
    first = last["first_update_seconds"]
    print(f"time to first update: {'n/a' if first is None else f'{first:.1f} s'} (start-up, data, compile, capture); "
          f"peak device memory: {'n/a' if peak is None else f'{peak / 2**30:.2f} GiB'}; wall: {wall:.1f} s")
    sizes = [int(n) for n in args.collect_envs.split(",") if n]
    if sizes:
        print()
        print("| envs | collection env steps/s (act + explore + env step + replay insert) |")
        print("|---:|---:|")
        for n_envs in sizes:
            steps = 200 if args.device == "cuda" else 20
            print(f"| {n_envs:,} | {collection_rate(args.device, n_envs, steps):.3g} |")
            if args.device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
