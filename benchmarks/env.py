"""Environment throughput: env steps per second for N parallel environments.

Usage: ``python benchmarks/env.py [--device cpu|cuda] [--sizes 1,256,4096,65536] [--features 16]
[--plans STOP,TARGET,HORIZON]``

``--plans`` steps with the trade_plans plugin's kernel (``foxhunt.env.plans``) and those parameters
(docs/fill-model.md, "Trade plans") instead of the plain step.

Prints one table row per N: the compiled step kernel launched once per step
from Python, on CUDA also the same step captured in a CUDA graph and replayed,
and beside them a plain numpy loop over one environment (the scalar reference
physics), the speed of a hand-written single-environment simulator.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from foxhunt.actions import branch_sizes
from foxhunt.data.instrument import preset
from foxhunt.env import EnvConfig, ReferenceEnv, VectorEnv
from foxhunt.env.plans import plan_isv, run_plan_step

__all__ = ["main"]


def synthetic(bars: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    close = 4000.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, bars)))
    open_ = np.r_[close[0], close[:-1]]
    prices = np.stack([open_, np.maximum(open_, close) * 1.002, np.minimum(open_, close) * 0.998, close], axis=1)
    return prices, rng.normal(size=(bars, n_features)).astype(np.float32)


def actions_for(n: int, device: str) -> torch.Tensor:
    rng = np.random.default_rng(1)
    return torch.from_numpy(rng.integers(0, branch_sizes(), size=(n, len(branch_sizes())))).to(device)


def time_launches(env: VectorEnv, actions: torch.Tensor, seconds: float) -> float:
    """Env steps per second with one Python launch per step."""
    env.step(actions)
    sync = torch.cuda.synchronize if env.device.type == "cuda" else (lambda: None)
    sync()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            env.step(actions)
        steps += 10
        sync()
    return env.n_envs * steps / (time.perf_counter() - start)


def time_graph(env: VectorEnv, actions: torch.Tensor, seconds: float, steps_per_graph: int = 32) -> float:
    """Env steps per second replaying a CUDA graph of ``steps_per_graph`` captured steps."""
    env.actions.copy_(actions)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            env.step(env.actions)  # warm-up: compile and load the kernel outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(steps_per_graph):
            env.step(env.actions)
    graph.replay()
    torch.cuda.synchronize()
    replays, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        graph.replay()
        replays += 1
        torch.cuda.synchronize()
    return env.n_envs * replays * steps_per_graph / (time.perf_counter() - start)


def time_reference(prices: np.ndarray, features: np.ndarray, config: EnvConfig, seconds: float) -> float:
    env = ReferenceEnv(prices, features, preset("ES"), config)
    env.reset()
    action = actions_for(1, "cpu")[0].numpy()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(action)
        steps += 1
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", default="1,256,4096,65536")
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--bars", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--plans", default=None, metavar="STOP,TARGET,HORIZON",
                        help="step with trade plans of these parameters, e.g. 0.004,0.008,24")
    args = parser.parse_args()
    prices, features = synthetic(args.bars, args.features)
    base = EnvConfig(episode_bars=512)
    reference = time_reference(prices, features, base, args.seconds)
    plans = None if args.plans is None else [float(value) for value in args.plans.split(",")]
    print(f"device={args.device} features={args.features} dtype=float32 threads={torch.get_num_threads()} "
          f"step={'plain' if plans is None else 'trade plans ' + args.plans}")
    header = f"{'N':>7} | {'launch/step (steps/s)':>22} | {'CUDA graph (steps/s)':>21} | {'numpy reference, N=1':>21}"
    print(header)
    print("-" * len(header))
    for n in (int(size) for size in args.sizes.split(",")):
        config = EnvConfig(n_envs=n, episode_bars=512)
        if plans is None:
            env = VectorEnv(prices, features, preset("ES"), config, device=args.device, seed=1)
        else:
            isv, layout = plan_isv(plans[0], plans[1], int(plans[2]), device=args.device)
            env = VectorEnv(prices, features, preset("ES"), config, device=args.device, seed=1, isv=isv,
                            layout=layout, step_kernel=run_plan_step)
        env.reset()
        actions = actions_for(n, args.device)
        launched = time_launches(env, actions, args.seconds)
        graphed = f"{time_graph(env, actions, args.seconds):21.3e}" if env.device.type == "cuda" else f"{'-':>21}"
        print(f"{n:>7} | {launched:22.3e} | {graphed} | {reference:21.3e}")


if __name__ == "__main__":
    main()
