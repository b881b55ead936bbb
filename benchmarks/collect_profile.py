"""Where the collection half of the training step spends its GPU time (torch profiler, eager launches).

    python benchmarks/collect_profile.py --envs 65536

Builds the trainer with the GPU profile, runs the collect half (act, explore,
env step, replay insert) eagerly under torch.profiler and prints the kernels
by total CUDA time, with the per-step share of each.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from foxhunt.config import load_config
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=65536)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    config = load_config(None, ['run.device="cuda"', "run.cuda_graph=false", f"env.n_envs={args.envs}",
                                'data.source="synthetic:planted?bars=20000&seed=1"', "folds.n_folds=1",
                                f"learner.replay.capacity={max(1 << 20, 4 * args.envs)}"])
    with tempfile.TemporaryDirectory() as directory:
        trainer = Trainer(config, RunDirectory(Path(directory)), show_progress=False)
        trainer._build()
        trainer._start_fold(trainer.data.folds[0])
        for _ in range(5):
            trainer._collect()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                trainer._collect()
            torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    events.sort(key=lambda e: e.device_time_total, reverse=True)
    total = sum(e.device_time_total for e in events)
    print(f"collect step at {args.envs:,} envs: {total / args.steps:.0f} us of GPU time per step "
          f"({args.envs * args.steps / total * 1e6:.3g} env steps/s if nothing else ran)")
    print(f"| kernel | us per step | share | launches per step |")
    print("|---|---:|---:|---:|")
    for event in events[:25]:
        print(f"| {event.key[:90]} | {event.device_time_total / args.steps:.1f} | "
              f"{event.device_time_total / total:.1%} | {event.count / args.steps:g} |")


if __name__ == "__main__":
    main()
