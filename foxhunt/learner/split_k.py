"""Split-K for the compiled update's weight-gradient GEMMs on CUDA: an inductor post-grad graph pass.

Why. With per-component gradients (``torch.func.vjp`` vmapped over one-hot cotangents,
:mod:`foxhunt.learner.functional`), each layer's weight gradient is a batched GEMM that reduces the whole
batch into a small matrix: ``[C, in, B] @ [C, B, out]``, e.g. ``[3, 128, 8192] @ [3, 8192, 256]`` for
three components' gradients of the branch heads' first layer. The output is a handful of 64×64 tiles, so
cuBLAS runs a handful of thread blocks on a GPU with 132 multiprocessors, each walking all 8 192 rows:
measured on an H200 at batch 8 192, four such GEMMs took 285 µs of an update of about 2.45 ms (docs/learner.md,
"Performance"); split, the update took 2.32 ms against 2.45 on one H200, 2.39 against 2.46 on another.

What. Every ``bmm(a [n, m, k], b [n, k, p])`` on CUDA whose output has few tiles and whose reduction is
long is rewritten as ``bmm`` over ``n × s`` chunks of ``k / s`` rows, summed over the ``s`` chunks
(:func:`split_count` picks ``s``). The chunks are views when ``a`` is stored transposed (the usual case
for a weight gradient) and one copy otherwise; the sum is a small reduction. Float results differ from
the unsplit GEMM only by the order of the additions.

Where. Passed per compile (``torch.compile(options=COMPILE_OPTIONS)``), so no global inductor setting is
changed; CPU graphs are left exactly as they are (the CPU path stays bit-reproducible). The pass's
``uuid`` is this file's hash, so inductor's graph cache never reuses a graph compiled by another version.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

__all__ = ["split_count", "SplitKPass", "COMPILE_OPTIONS"]

# A GEMM is split when its output has fewer tiles than this (about one wave of thread blocks on an H200) ...
_FEW_TILES = 96
# ... into chunks of at least this many reduction rows, and into no more than this many chunks per GEMM.
_MIN_CHUNK = 512
_MAX_SPLIT = 32
_TILE = 64


def split_count(batch: int, rows: int, cols: int, depth: int) -> int:
    """Chunks to split a ``[batch, rows, depth] @ [batch, depth, cols]`` GEMM's reduction into (1: leave it).

    Split only when the output is a few tiles and the reduction long; then as many chunks (a power of two
    that divides ``depth``, each at least ``_MIN_CHUNK`` long) as bring the thread blocks to about one wave.
    """
    tiles = batch * math.ceil(rows / _TILE) * math.ceil(cols / _TILE)
    if tiles >= _FEW_TILES:
        return 1
    split = 1
    while (split * 2 <= _MAX_SPLIT and depth % (split * 2) == 0 and depth // (split * 2) >= _MIN_CHUNK
           and tiles * split * 2 <= 2 * _FEW_TILES):
        split *= 2
    return split


def _insert(graph: torch.fx.Graph, op: Any, *args: Any) -> torch.fx.Node:
    """Add ``op(*args)`` to the graph with its fake value, which inductor's lowering reads."""
    node = graph.call_function(op, args)
    values = [arg.meta["val"] if isinstance(arg, torch.fx.Node) else arg for arg in args]
    with values[0].fake_mode:
        node.meta["val"] = op(*values)
    return node


def _split_bmm(graph: torch.fx.Graph, a: torch.fx.Node, b: torch.fx.Node, n: int, m: int, p: int, split: int,
               chunk: int) -> torch.fx.Node:
    """``bmm(a [n, m, k], b [n, k, p])`` as ``n × split`` chunk products of ``chunk`` rows, summed per chunk."""
    aten = torch.ops.aten
    a_chunks = _insert(graph, aten.reshape.default, a, [n, m, split, chunk])
    a_chunks = _insert(graph, aten.permute.default, a_chunks, [0, 2, 1, 3])
    a_chunks = _insert(graph, aten.reshape.default, a_chunks, [n * split, m, chunk])
    b_chunks = _insert(graph, aten.reshape.default, b, [n * split, chunk, p])
    products = _insert(graph, aten.bmm.default, a_chunks, b_chunks)
    products = _insert(graph, aten.reshape.default, products, [n, split, m, p])
    return _insert(graph, aten.sum.dim_IntList, products, [1])


class SplitKPass(CustomGraphPass):
    """Rewrite the few-tile, long-reduction ``bmm`` nodes of a post-grad graph as split-K (module docstring).

    ``device_types``: the devices whose GEMMs are rewritten (CUDA for the update; tests name the CPU too).
    """

    def __init__(self, device_types: tuple[str, ...] = ("cuda",)) -> None:
        self.device_types = tuple(device_types)
        # (n, m, p, k, split) of each GEMM this process rewrote (a graph inductor loads from its cache is not
        # compiled again, so it is not listed)
        self.rewritten: list[tuple[int, int, int, int, int]] = []

    def __call__(self, graph: torch.fx.Graph) -> None:
        aten = torch.ops.aten
        for node in list(graph.find_nodes(op="call_function", target=aten.bmm.default)):
            a, b = node.args
            a_val, b_val = a.meta.get("val"), b.meta.get("val")
            if a_val is None or b_val is None or a_val.device.type not in self.device_types:
                continue
            n, m, k = (int(size) for size in a_val.shape)
            p = int(b_val.shape[2])
            split = split_count(n, m, p, k)
            if split == 1:
                continue
            self.rewritten.append((n, m, p, k, split))
            with graph.inserting_before(node):
                total = _split_bmm(graph, a, b, n, m, p, split, k // split)
            total.meta.update({key: value for key, value in node.meta.items() if key != "val"})
            node.replace_all_uses_with(total)
            graph.erase_node(node)
        graph.lint()

    def uuid(self) -> Any:
        return f"{get_hash_for_files((__file__,)).hex()}:{','.join(self.device_types)}"


# inductor options for the compiled update's pieces (``torch.compile(..., options=COMPILE_OPTIONS)``)
COMPILE_OPTIONS: dict[str, Any] = {"post_grad_custom_post_pass": SplitKPass()}
