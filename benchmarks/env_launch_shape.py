"""The environment step kernel's CUDA launch shape: env steps/s per register cap and block size.

    python benchmarks/env_launch_shape.py            # one NVIDIA GPU

Compiles the step kernel (``foxhunt.env.physics.env_step_row``) once per
register cap and times it, replayed from a CUDA graph as in
``benchmarks/env.py``, at 65,536 and 1,048,576 environments for each block
size. ``foxhunt.env.kernel.ENV_STEP`` uses the shape this table chose
(docs/kernels.md, "Memory layout and launch shape").
"""

from __future__ import annotations

import argparse

import torch

from env import actions_for, synthetic, time_graph
from foxhunt.data.instrument import preset
from foxhunt.env import EnvConfig, VectorEnv
from foxhunt.env.physics import env_step_row
from foxhunt.kernels.context import KernelContext
from foxhunt.kernels.dual import DualKernel
from foxhunt.env.kernel import launch_env_kernel

__all__ = ["main"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="none,64,48,40,32", help="register caps per thread ('none': uncapped)")
    parser.add_argument("--blocks", default="128,256,512", help="threads per block")
    parser.add_argument("--sizes", default="65536,1048576")
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs an NVIDIA GPU")
    prices, features = synthetic(20_000, 16)
    sizes = [int(n) for n in args.sizes.split(",")]
    print("| registers | threads/block | " + " | ".join(f"{n:,} envs" for n in sizes) + " |")
    print("|---|---:|" + "---:|" * len(sizes))
    for cap in args.caps.split(","):
        for threads in (int(t) for t in args.blocks.split(",")):
            kernel = DualKernel(env_step_row, f"launch_shape.{cap}.{threads}", threads_per_block=threads,
                                max_registers=None if cap == "none" else int(cap))

            def step(context: KernelContext, kernel: DualKernel = kernel) -> None:
                launch_env_kernel(kernel, context)

            rates = []
            for n in sizes:
                env = VectorEnv(prices, features, preset("ES"), EnvConfig(n_envs=n, episode_bars=512), device="cuda",
                                seed=1, step_kernel=step)
                env.reset()
                rates.append(time_graph(env, actions_for(n, "cuda"), args.seconds))
                del env
                torch.cuda.empty_cache()
            print(f"| {cap} | {threads} | " + " | ".join(f"{rate:.3g}" for rate in rates) + " |", flush=True)


if __name__ == "__main__":
    main()
