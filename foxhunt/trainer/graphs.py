"""Replaying the training step's two halves as CUDA graphs.

On a GPU the training step is a few hundred small kernels; launched one by one
from Python, the launches, not the GPU, set the pace. A CUDA graph records the
launches once and replays them with one call. :class:`StepGraphs` wraps the
two halves of a training iteration, *collect* (act, explore, env step, replay
insert) and *update* (one learner update and the ``STEP`` kernels), so the
trainer calls them the same way on every device:

- on the CPU (or with ``run.cuda_graph = false``) each call runs eagerly;
- on CUDA the first ``warmup`` calls of each half run eagerly on a side stream
  (they are real training work: lazy initialisation, torch.compile and the
  optimizer's state happen there), the next call captures the half into a
  graph and replays it, and every later call replays it.

Capturing launches nothing, so a captured run does the same work in the same
order as an eager one. Every random draw inside comes from device state (the
learner's generator, registered with the graph, and counter-based hashes), so
replays draw afresh. :meth:`reset` drops the graphs at a fold boundary; the
next calls capture again against the fold's buffers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["StepGraphs", "WARMUP_CALLS"]

# Eager calls of each half before capture. torch asks for warm-up on a side stream before capture so that
# lazily created state (cuBLAS handles and workspaces, optimizer moments, compiled code) exists outside the graph.
WARMUP_CALLS = 3


class _Half:
    """One captured-on-demand callable."""

    def __init__(self, name: str, run: Callable[[], None], owner: StepGraphs,
                 generators: tuple[torch.Generator, ...]) -> None:
        self.name, self.run, self.owner, self.generators = name, run, owner, generators
        self.graph: torch.cuda.CUDAGraph | None = None
        self.eager_calls = 0

    def __call__(self) -> None:
        owner = self.owner
        if not owner.enabled:
            self.run()
            return
        if self.graph is not None:
            self.graph.replay()
            owner.replays[self.name] += 1
            return
        if self.eager_calls < owner.warmup:
            owner._on_side_stream(self.run)
            self.eager_calls += 1
            return
        self.graph = owner._capture(self.run, self.generators)
        owner.captures[self.name] += 1
        self.graph.replay()
        owner.replays[self.name] += 1


class StepGraphs:
    """``collect()`` and ``update()``: eager, or replayed CUDA graphs captured on first use after a warm-up."""

    def __init__(self, collect: Callable[[], None], update: Callable[[], None], *, enabled: bool,
                 update_generators: tuple[torch.Generator, ...] = (), warmup: int = WARMUP_CALLS) -> None:
        self.enabled = enabled
        self.warmup = warmup
        self.captures = {"collect": 0, "update": 0}
        self.replays = {"collect": 0, "update": 0}
        # Collection draws only from counter-based hashes; the update draws from the learner's generator.
        self.collect = _Half("collect", collect, self, ())
        self.update = _Half("update", update, self, update_generators)
        self._pool = None  # a fold's graphs share one memory pool, made at the fold's first capture
        self._stream = torch.cuda.Stream() if enabled else None

    def reset(self) -> None:
        """Forget both graphs (fold boundary): the next calls warm up and capture again."""
        for half in (self.collect, self.update):
            half.graph = None
            half.eager_calls = 0
        if self.enabled:
            torch.cuda.synchronize()  # a graph still replaying must finish before its memory is released
            # Dropping every graph of a pool releases the pool itself; capturing into its old handle again trips
            # an internal assert of torch's caching allocator (seen at the second fold of a run), so the next
            # fold's first capture makes a fresh pool.
            self._pool = None

    def _on_side_stream(self, run: Callable[[], None]) -> None:
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            run()
        torch.cuda.current_stream().wait_stream(stream)

    def _capture(self, run: Callable[[], None], generators: tuple[torch.Generator, ...]) -> torch.cuda.CUDAGraph:
        torch.cuda.synchronize()
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        for generator in generators:
            graph.register_generator_state(generator)  # replays advance the generator's offset on the device
        with torch.cuda.graph(graph, pool=self._pool):
            run()
        return graph
