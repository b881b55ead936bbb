"""The price of crash safety: the resume checkpoint written at every epoch boundary, on the default config.

    python benchmarks/resume_checkpoint.py                 # the default config on this machine's CPU
    python benchmarks/resume_checkpoint.py --epoch         # and one training epoch, for the ratio
    python benchmarks/resume_checkpoint.py --device cuda   # the GPU profile (a much larger replay buffer)

Builds the trainer of the default config (its device profile applies) and
writes its resume checkpoint ``--repeat`` times into a temporary run folder,
exactly as the trainer does at an epoch boundary: the state serialised, hashed,
written into a staging folder, fsynced and published. The whole replay buffer
is saved however full it is, so the size, and the price, do not depend on how
far training got: no training is needed to measure it. Prints the checkpoint's
size and the seconds per write (median, min, max); with ``--epoch``, the
seconds of one epoch's collection and learning as well.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import structlog

from foxhunt.config import load_config
from foxhunt.trainer import resume
from foxhunt.trainer.progress import RunProgress
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--epoch", action="store_true", help="also time one epoch of collection and learning")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    config = load_config(None, [f'run.device="{args.device}"'])
    with tempfile.TemporaryDirectory() as directory:
        run_dir = RunDirectory(Path(directory) / "run")
        trainer = Trainer(config, run_dir, show_progress=False)
        trainer._build()
        trainer._start_fold(trainer.data.folds[0])
        epoch_seconds = None
        if args.epoch:
            with RunProgress(False, 1, 1) as progress:
                epoch_seconds = trainer._collect_and_learn(0, progress)["seconds"]
        position = resume.Position(fold=0, epoch=1)
        seconds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            path = resume.save(trainer, position)
            seconds.append(time.perf_counter() - started)
        size = sum(f.stat().st_size for f in path.iterdir())
        run_dir.release()
    print(f"device {trainer.device}, replay capacity {config.learner.replay.capacity}, {config.env.n_envs} envs")
    print(f"resume checkpoint: {size / 2**20:.1f} MiB")
    print(f"write: median {statistics.median(seconds):.3f} s, min {min(seconds):.3f} s, max {max(seconds):.3f} s "
          f"over {args.repeat} writes")
    if epoch_seconds is not None:
        print(f"one epoch of collection and learning: {epoch_seconds:.1f} s "
              f"(the checkpoint adds {statistics.median(seconds) / epoch_seconds:.1%})")


if __name__ == "__main__":
    main()
