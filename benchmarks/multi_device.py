"""Multi-device scaling: `foxhunt train --devices N` for N = 1 and 2 (or --devices-list), the same run otherwise.

    python benchmarks/multi_device.py --device cuda                 # 1 and 2 GPUs of one host (NCCL)
    python benchmarks/multi_device.py --device cpu --epochs 2 --set train.env_steps_per_epoch=1024 \\
        --set train.updates_per_epoch=16 --set train.warmup_env_steps=256 --set env.n_envs=16 \\
        --set 'learner.hidden=[32,32]' --set learner.batch_size=32 --set learner.replay.capacity=4096  # CPU, gloo

Runs `foxhunt train` as a user would (a subprocess, its own run directory) for each device count and reads
rank 0's metrics.jsonl. The ranks step in lockstep (one all-reduce per update), so per epoch:

* env steps/s (all ranks) = N x rank 0's ``env_steps_per_s`` (each rank steps its own ``env.n_envs``);
* updates/s = rank 0's ``updates_per_s`` (every update is one global update over N x ``learner.batch_size``);
* scaling efficiency = env steps/s at N / (N x env steps/s at 1).

Every count runs eager (multi-device ranks turn ``learner.compile`` and CUDA graphs off), so the N = 1 row is
run with ``learner.compile=false`` and ``run.cuda_graph=false`` too: the table compares like with like. The
epochs after the first are averaged (the first includes start-up and warm-up).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

DATA = "synthetic:planted?bars=20000&seed=1"
EAGER = ("learner.compile=false", "run.cuda_graph=false")


def run(devices: int, device: str, epochs: int, extra: list[str], out: Path) -> tuple[list[dict], float]:
    command = [
        sys.executable, "-m", "foxhunt.cli.main", "train", "--data", DATA, "--device", device, "--no-progress",
        "--out", str(out), "--devices", str(devices), "--set", f"train.epochs={epochs}", "--set", "folds.n_folds=1",
        *[arg for override in (*EAGER, *extra) for arg in ("--set", override)],
    ]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"foxhunt train --devices {devices} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows, time.perf_counter() - started


def mean_after_first(rows: list[dict], key: str) -> float:
    values = [row[key] for row in rows[1:]] or [row[key] for row in rows]
    return sum(values) / len(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--devices-list", default="1,2", help="device counts to run, comma separated (default 1,2)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    counts = [int(n) for n in args.devices_list.split(",")]
    results = {}
    with TemporaryDirectory(prefix="foxhunt-multi-device-") as directory:
        for n in counts:
            rows, wall = run(n, args.device, args.epochs, args.overrides, Path(directory) / f"devices{n}")
            results[n] = {
                "env_steps_per_s": n * mean_after_first(rows, "env_steps_per_s"),
                "updates_per_s": mean_after_first(rows, "updates_per_s"),
                "wall_s": wall,
            }
    base = results[counts[0]]["env_steps_per_s"] / counts[0]
    print(f"{'devices':>7} {'env steps/s':>12} {'updates/s':>10} {'efficiency':>10} {'wall s':>8}")
    for n, r in results.items():
        efficiency = r["env_steps_per_s"] / (n * base)
        print(f"{n:>7} {r['env_steps_per_s']:>12.0f} {r['updates_per_s']:>10.1f} {efficiency:>10.2f} {r['wall_s']:>8.1f}")


if __name__ == "__main__":
    main()
