"""A compiled CUDA run trains the same policy whatever inductor's kernel timings say.

Run on an NVIDIA machine (not collected by the CPU suite)::

    python3 -m pytest -q tests_gpu/test_compile_reproducible.py

Inductor, left to itself, times candidate kernels on the device and keeps the fastest; with another load on
the GPU another one wins, adds in another order, and the same seed trains to another policy.
``foxhunt.learner.update_pieces.REPRODUCIBLE_COMPILE`` makes it choose without timing. Two `foxhunt train`
runs of one seed, each compiling from its own empty inductor cache, one of them with every timing inverted
(inductor's own test switch ``TORCHINDUCTOR_DISTORT_BENCHMARKING_RESULT=inverse``: the slowest candidate wins),
must write byte-identical fold policies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from foxhunt.checkpoint import TENSORS_FILE

N_ENVS = 1024
RUN = [
    "--data", "synthetic:planted?bars=3000&seed=2", "--device", "cuda", "--no-progress",
    "--set", "run.seed=5",
    "--set", f"env.n_envs={N_ENVS}",
    "--set", "learner.batch_size=1024",
    "--set", "learner.replay.capacity=131072",
    "--set", "learner.compile=true",
    "--set", "train.epochs=2",
    "--set", f"train.env_steps_per_epoch={N_ENVS * 24}",
    "--set", "train.updates_per_epoch=96",
    "--set", f"train.warmup_env_steps={N_ENVS * 6}",
    "--set", "folds.n_folds=1",
    "--set", "folds.train_bars=1500",
    "--set", "folds.validation_bars=300",
]


def _start(root: Path, timings: str) -> tuple[subprocess.Popen, Path]:
    """`foxhunt train` in its own process, compiling from an empty inductor cache under ``root``; its stderr goes
    to ``root/stderr.txt`` (a pipe left unread while the other run finishes could fill and stall it)."""
    root.mkdir(parents=True)
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
                   "TORCHINDUCTOR_DISTORT_BENCHMARKING_RESULT": timings}
    command = [sys.executable, "-m", "foxhunt.cli.main", "train", *RUN, "--out", str(root / "run")]
    with open(root / "stderr.txt", "w") as stderr:
        return subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=stderr), root


def test_inverted_kernel_timings_train_the_same_policy(tmp_path) -> None:
    if not torch.cuda.is_available():
        raise RuntimeError("tests_gpu needs an NVIDIA GPU; run it on the device machine")
    runs = [_start(tmp_path / name, timings) for name, timings in (("measured", ""), ("inverted", "inverse"))]
    for process, root in runs:
        process.wait(timeout=900)
        assert process.returncode == 0, (root / "stderr.txt").read_text()[-4000:]
    measured, inverted = (root / "run" for _, root in runs)
    summaries = [json.loads((out / "summary.json").read_text())["overall"]["agent"] for out in (measured, inverted)]
    assert summaries[0] == summaries[1]
    policies = [(out / "checkpoints" / "fold_0" / TENSORS_FILE).read_bytes() for out in (measured, inverted)]
    assert policies[0] == policies[1]
