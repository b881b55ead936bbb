"""On a real GPU: the one-thread ISV kernels launch without numba's grid-size warning, also inside a CUDA graph.

The CPU suite checks the filter against a stand-in (the simulator never warns);
here numba-cuda's own launch configuration runs. Run with ``python3 -m pytest -q tests_gpu``.
"""

from __future__ import annotations

import warnings

import torch

from foxhunt.kernels import Backend, DualKernel, device_function


@device_function
def _count_row(i, args):
    args[0][i] += 1.0


COUNT = DualKernel(_count_row, "gpu_test.count")


def _cuda() -> torch.device:
    if not torch.cuda.is_available():
        raise RuntimeError("tests_gpu needs an NVIDIA GPU; run it on the device machine")
    return torch.device("cuda")


def _grid_size_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "Grid size" in str(w.message)]


def test_numba_still_warns_when_a_one_block_launch_is_configured_directly() -> None:
    # Without this, the next test could pass because numba stopped warning, not because foxhunt filters it.
    _cuda()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        COUNT.cuda[1, 256]
    assert _grid_size_warnings(caught)


def test_one_row_launches_print_no_grid_size_warning_eager_and_captured() -> None:
    counter = torch.zeros(1, dtype=torch.float64, device=_cuda())
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            COUNT.launch(Backend.CUDA, 1, (counter,))
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            COUNT.launch(Backend.CUDA, 1, (counter,))  # warm-up on the capture stream
            side.synchronize()
            with torch.cuda.graph(graph, stream=side):
                COUNT.launch(Backend.CUDA, 1, (counter,))
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
    assert _grid_size_warnings(caught) == []
    assert counter.item() == 3 + 1 + 5  # eager launches, the warm-up, and the replays (capture itself runs nothing)
