"""The split-K graph pass: which GEMMs it splits, and that a split GEMM equals a float64 reference."""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.learner.split_k import COMPILE_OPTIONS, SplitKPass, split_count


@given(batch=st.integers(1, 16), rows=st.integers(1, 512), cols=st.integers(1, 512),
       depth=st.sampled_from([64, 500, 1024, 3000, 8192, 65536]))
def test_split_count_keeps_chunks_long_and_dividing_the_reduction(batch, rows, cols, depth):
    split = split_count(batch, rows, cols, depth)
    assert split >= 1 and split & (split - 1) == 0  # a power of two
    assert depth % split == 0
    if split > 1:
        assert depth // split >= 512
        assert batch * math.ceil(rows / 64) * math.ceil(cols / 64) < 96  # only few-tile outputs are split


def test_the_weight_gradient_shapes_measured_on_the_h200_are_split():
    # [components, in, batch] @ [components, batch, out] at batch 8192 (docs/learner.md, "Performance")
    assert split_count(3, 128, 256, 8192) > 1
    assert split_count(5, 64, 16, 8192) > 1
    assert split_count(4, 8192, 204, 64) == 1  # a forward GEMM: many tiles, short reduction


def _bmm_relu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a, b).relu()


def test_a_split_gemm_matches_a_float64_reference_in_both_layouts():
    split_pass = SplitKPass(device_types=("cpu",))
    # caches off: a graph inductor loads from its on-disk cache runs no pass, and `rewritten` would stay empty
    compiled = torch.compile(_bmm_relu, fullgraph=True, dynamic=False,
                             options={"post_grad_custom_post_pass": split_pass, "fx_graph_cache": False})
    generator = torch.Generator().manual_seed(20261204)
    transposed = torch.randn(2, 2048, 64, generator=generator).transpose(1, 2)  # a weight gradient's layout
    contiguous = torch.randn(2, 64, 2048, generator=generator)
    right = torch.randn(2, 2048, 32, generator=generator)
    for left in (transposed, contiguous):
        got = compiled(left, right)
        reference = torch.bmm(left.double(), right.double()).relu()
        assert torch.allclose(got.double(), reference, rtol=1e-5, atol=1e-4)
    assert split_pass.rewritten and all(split == 4 for *_, split in split_pass.rewritten)


def test_the_update_pass_leaves_cpu_graphs_as_they_are():
    update_pass = COMPILE_OPTIONS["post_grad_custom_post_pass"]
    before = list(update_pass.rewritten)
    compiled = torch.compile(_bmm_relu, fullgraph=True, dynamic=False,
                             options={**COMPILE_OPTIONS, "fx_graph_cache": False})
    a, b = torch.randn(2, 64, 2048), torch.randn(2, 2048, 32)
    assert torch.equal(compiled(a, b), torch.bmm(a, b).relu())  # bit for bit: the CPU path is not rewritten
    assert update_pass.rewritten == before
