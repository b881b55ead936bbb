"""Learner update throughput: ms per update and updates/s, all five built-in loss components on.

Usage::

    python benchmarks/learner.py            # full run: CPU, and CUDA when available
    python benchmarks/learner.py --quick    # a short run (fewer timed updates)
    python benchmarks/learner.py --device cuda --batches 8192

Modes:

- ``eager``: per-component gradients by one backward pass each after one shared forward;
- ``compiled``: ``[learner] compile = true`` (torch.compile, inductor; components grouped by reach);
- on CUDA, ``graph``, ``compiled-graph``: the whole update (replay sampling included)
  of ``eager`` / ``compiled`` captured once in a CUDA graph and replayed.

The network is the default ``[learner]`` config: trunk (128, 128), heads 64,
51 atoms, 8+8 IQN fractions, 5 ensemble heads; observations are 64 wide.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

import foxhunt.learner.declarations as learner_declarations
from foxhunt.actions import Branch, branch_sizes
from foxhunt.isv import ISV
from foxhunt.learner import Learner, LearnerConfig, ReplayConfig
from foxhunt.plugin.host import PluginHost
from foxhunt_plugins.losses import c51, cql, ensemble, iqn, mse

OBS_DIM = 64
N_ENVS = 256
CAPACITY = 256 * 1000  # 1000 steps of 256 environments (not a power of two)


MODES = {  # mode -> (compile, CUDA graph)
    "eager": (False, False),
    "compiled": (True, False),
    "graph": (False, True),
    "compiled-graph": (True, True),
}


def build(device: str, compile_update: bool = False) -> Learner:
    host = PluginHost()
    host.add_plugin(learner_declarations, "learner")
    for module in (c51, mse, cql, iqn, ensemble):
        host.add_plugin(module, module.NAME)
    host.declare()
    registries = host.freeze()
    config = LearnerConfig(compile=compile_update, replay=ReplayConfig(capacity=CAPACITY))
    isv = ISV(registries.layout, device)
    learner = Learner(config, registries.layout, isv, host.loss_components(config), OBS_DIM, device, seed=0,
                      n_envs=N_ENVS)
    g = torch.Generator(device).manual_seed(1)
    sizes = torch.tensor(branch_sizes(), device=device)
    for _ in range(learner.replay.rows):
        obs = torch.randn(N_ENVS, OBS_DIM, generator=g, device=device)
        actions = (torch.rand(N_ENVS, len(Branch), generator=g, device=device) * sizes).long()
        rewards = torch.randn(N_ENVS, generator=g, device=device)
        dones = (torch.rand(N_ENVS, generator=g, device=device) < 0.01).float()
        learner.replay.add(obs, actions, rewards, torch.randn(N_ENVS, OBS_DIM, generator=g, device=device), dones)
    return learner


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_it(step: Callable[[], None], device: str, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    sync(device)
    return (time.perf_counter() - start) / iters * 1e3


def graphed_step(learner: Learner, batch_size: int) -> Callable[[], None]:
    """Capture sample + update in one CUDA graph (after eager warm-up on a side stream)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            learner.step(batch_size)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(learner.generator)
    with torch.cuda.graph(graph):
        learner.step(batch_size)
    return graph.replay


def sync_check(batch_size: int) -> None:
    """Invariant 3 on CUDA: one update under ``set_sync_debug_mode("error")``; any host sync raises here."""
    learner = build("cuda")
    learner.step(batch_size)  # first update: lazy CUDA/cuBLAS initialisation may sync, outside the check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        learner.step(batch_size)
        print(f"sync check: one update at batch {batch_size} made no host-device synchronisation")
    finally:
        torch.cuda.set_sync_debug_mode("default")


def profile(batch_size: int, mode: str, out: str | None = None) -> None:
    """Top CUDA kernels of five updates in ``mode`` (where the GPU time goes)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    compile_update, graphed = MODES[mode]
    learner = build("cuda", compile_update)
    step = graphed_step(learner, batch_size) if graphed else (lambda: learner.step(batch_size))
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type == DeviceType.CUDA]
    kernels.sort(key=lambda e: e.self_device_time_total, reverse=True)
    total = sum(e.self_device_time_total for e in kernels)
    print(f"{mode}: GPU time per update {total / 5 / 1e3:.3f} ms; kernels per update "
          f"{sum(e.count for e in kernels) // 5}")
    lines = [f"{e.key[:70]:<70} {e.self_device_time_total / 5 / 1e3:8.3f} ms  {e.count // 5:5d} calls/update"
             for e in kernels]
    print("\n".join(lines[:40]))
    if out:
        with open(out, "w") as file:
            file.write("\n".join(f"{e.key}\t{e.self_device_time_total / 5:.1f} us\t{e.count // 5}" for e in kernels))


def run(device: str, batches: list[int], modes: list[str], quick: bool) -> list[dict[str, object]]:
    rows = []
    for mode in modes:
        compile_update, graphed = MODES[mode]
        for batch in batches:
            learner = build(device, compile_update)
            if device == "cpu":
                warmup, iters = (1, 2) if quick else (2, 8)
            else:
                warmup, iters = (5, 20) if quick else (20, 200)
            try:
                step = graphed_step(learner, batch) if graphed else (lambda: learner.step(batch))
                ms = time_it(step, device, warmup, iters)
                clips = int(learner.metrics()["grad.safety_clips"])
                rows.append({"device": device, "mode": mode, "batch": batch, "ms": ms, "ups": 1e3 / ms,
                             "note": "" if clips == 0 else f"safety clips {clips}"})
            except Exception as error:  # a mode that cannot run here is reported in the table, not fatal
                rows.append({"device": device, "mode": mode, "batch": batch, "ms": float("nan"), "ups": float("nan"),
                             "note": f"{type(error).__name__}: {str(error).splitlines()[0][:70]}"})
            print(_row(rows[-1]), flush=True)
    return rows


def _row(r: dict[str, object]) -> str:
    return f"| {r['device']:<6} | {r['mode']:<22} | {r['batch']:>6} | {r['ms']:>10.3f} | {r['ups']:>10.1f} | {r['note']} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed updates")
    parser.add_argument("--device", choices=("all", "cpu", "cuda"), default="all")
    parser.add_argument("--batches", type=int, nargs="+", default=[1024, 8192, 16384])
    parser.add_argument("--modes", nargs="+", default=None, choices=list(MODES),
                        help="default: every mode that runs on the device (graph modes are CUDA only)")
    parser.add_argument("--tf32", action="store_true",
                        help="CUDA: allow TF32 matmuls (torch.backends.cuda.matmul.allow_tf32); the trainer's choice")
    parser.add_argument("--profile", action="store_true",
                        help="CUDA: top kernels of an update in the first of --modes (default eager)")
    parser.add_argument("--sync-check", action="store_true", help="CUDA: fail on any host sync inside an update")
    parser.add_argument("--combo-kernels", action="store_true",
                        help="compiled modes: let inductor launch independent kernels together (combo_kernels)")
    parser.add_argument("--profile-out", default=None, help="--profile: also write every kernel to this file")
    args = parser.parse_args()
    if args.combo_kernels:
        import torch._inductor.config as inductor_config

        inductor_config.combo_kernels = True
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if args.profile:
        profile(args.batches[0], (args.modes or ["eager"])[0], args.profile_out)
        return
    if args.sync_check:
        sync_check(args.batches[0])
        return
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    devices = [d for d in devices if d == "cpu" or torch.cuda.is_available()]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
          + (f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""))
    print("| device | mode                   |  batch | ms/update  | updates/s  | note |")
    print("|--------|------------------------|--------|------------|------------|------|")
    for device in devices:
        modes = [m for m in (args.modes or list(MODES)) if device == "cuda" or not MODES[m][1]]
        run(device, args.batches, modes, args.quick)


if __name__ == "__main__":
    main()
