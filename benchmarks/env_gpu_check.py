"""Checks of the environment's CUDA path that need a real GPU (run by env_gpu_check.sh).

1. The CUDA kernel and the CPU kernel agree (float64, 4096 environments, 200 steps).
2. A torch CUDA graph that captures env steps and exploration draws new random
   numbers at every replay (the counters live in device memory).
3. The captured step does no host synchronisation: capture would fail otherwise.
"""

from __future__ import annotations

import numpy as np
import torch

from foxhunt.actions import branch_sizes
from foxhunt.data.instrument import preset
from foxhunt.env import PS, EnvConfig, VectorEnv
from foxhunt.learner.exploration import BranchExplorer

__all__ = ["main"]


def market(bars: int = 5000, n_features: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    close = 4000.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, bars)))
    open_ = np.r_[close[0], close[:-1]] * np.exp(rng.normal(0.0, 0.002, bars))
    high = np.maximum(open_, close) * (1.0 + np.abs(rng.normal(0.0, 0.003, bars)))
    low = np.minimum(open_, close) * (1.0 - np.abs(rng.normal(0.0, 0.003, bars)))
    return np.stack([open_, high, low, close], axis=1), rng.normal(size=(bars, n_features)).astype(np.float32)


def check_cuda_matches_cpu() -> None:
    prices, features = market()
    config = EnvConfig(n_envs=4096, episode_bars=64, w_churn=5.0, w_drawdown=0.5, kelly_warmup_trades=4)
    envs = [VectorEnv(prices, features, preset("ES"), config, seed=3, dtype=torch.float64, device=d) for d in ("cpu", "cuda")]
    for env in envs:
        env.reset()
    rng = np.random.default_rng(1)
    for _ in range(200):
        actions = torch.from_numpy(rng.integers(0, branch_sizes(), size=(config.n_envs, 4)))
        for env in envs:
            env.step(actions.to(env.device))
    cpu, gpu = envs[0].state, envs[1].state.cpu()
    # The GPU fuses multiply-adds, so money can differ in the last bits; positions and bars must not.
    assert torch.equal(cpu[:, PS.POSITION], gpu[:, PS.POSITION]), "positions differ between CPU and CUDA"
    assert torch.equal(cpu[:, PS.BAR], gpu[:, PS.BAR]), "bars differ between CPU and CUDA"
    torch.testing.assert_close(gpu, cpu, rtol=1e-9, atol=1e-4)
    torch.testing.assert_close(envs[1].obs.cpu(), envs[0].obs, rtol=1e-5, atol=1e-5)
    print("cuda kernel == cpu kernel: ok (4096 envs x 200 steps, float64)")


def check_graph_replays_draw_new_numbers() -> None:
    prices, features = market()
    config = EnvConfig(n_envs=1024, episode_bars=1)  # every step ends an episode and draws a new start
    env = VectorEnv(prices, features, preset("ES"), config, seed=5, device="cuda")
    explorer = BranchExplorer(config.n_envs, seed=5, device="cuda")
    q = [torch.randn((config.n_envs, size), device="cuda") for size in branch_sizes()]
    env.reset()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            env.step(explorer.epsilon_greedy(q, 0.5))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        actions = explorer.epsilon_greedy(q, 0.5)
        env.step(actions)
    starts, drawn = [], []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        starts.append(env.state[:, PS.START_BAR].clone())
        drawn.append(actions.clone())
    assert not torch.equal(starts[0], starts[1]) and not torch.equal(starts[1], starts[2]), "starts repeat"
    assert not torch.equal(drawn[0], drawn[1]) and not torch.equal(drawn[1], drawn[2]), "actions repeat"
    print("cuda graph replays draw new starts and new exploration actions: ok")


def main() -> None:
    assert torch.cuda.is_available(), "this check needs an NVIDIA GPU"
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    check_cuda_matches_cpu()
    check_graph_replays_draw_new_numbers()


if __name__ == "__main__":
    main()
