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
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))


if __name__ == "__main__":
    main()
