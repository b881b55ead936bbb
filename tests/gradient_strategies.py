"""Hypothesis strategies for per-component gradients, shared by the combiner tests.

Used by tests/learner and tests/builtin_plugins.
"""

from __future__ import annotations

import attrs
import torch
from hypothesis import strategies as st

ROW_KINDS = ("random", "zero", "parallel", "antiparallel", "one_hot")
MAX_GRAD_NORMS = (1e-3, 1.0, 10.0, 1e4)


@attrs.frozen
class ComponentGradients:
    """``flat [C, P]``, ``losses [C]`` (non-negative, like every built-in loss), ``limits [C]`` summing to
    ``max_grad_norm``, and log-variances ``[C, 1]``."""

    flat: torch.Tensor
    losses: torch.Tensor
    limits: torch.Tensor
    max_grad_norm: float
    log_variances: torch.Tensor


@st.composite
def component_gradients(draw: st.DrawFn, dtype: torch.dtype = torch.float32) -> ComponentGradients:
    """Rows that are random, zero, parallel or antiparallel to a shared direction, or one-hot, each at a scale
    from 1e-8 to 1e18 (the top of float32's range for a norm of 48 entries)."""
    count = draw(st.integers(1, 5))
    size = draw(st.integers(1, 48))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    shared = torch.randn(size, generator=generator, dtype=torch.float64)
    rows = []
    for _ in range(count):
        kind = draw(st.sampled_from(ROW_KINDS))
        scale = 10.0 ** draw(st.integers(-8, 18))
        if kind == "random":
            row = torch.randn(size, generator=generator, dtype=torch.float64)
        elif kind == "zero":
            row = torch.zeros(size, dtype=torch.float64)
        elif kind == "one_hot":
            row = torch.zeros(size, dtype=torch.float64)
            row[draw(st.integers(0, size - 1))] = 1.0
        else:
            row = shared if kind == "parallel" else -shared
        rows.append(row * scale)
    weights = torch.tensor(draw(st.lists(st.floats(0.05, 1.0), min_size=count, max_size=count)), dtype=torch.float64)
    max_grad_norm = draw(st.sampled_from(MAX_GRAD_NORMS))
    losses = [10.0 ** draw(st.integers(-6, 6)) * draw(st.sampled_from((0.0, 0.5, 1.0))) for _ in range(count)]
    log_variances = draw(st.lists(st.floats(-30.0, 30.0), min_size=count, max_size=count))
    return ComponentGradients(
        flat=torch.stack(rows).to(dtype),
        losses=torch.tensor(losses, dtype=dtype),
        limits=(weights / weights.sum() * max_grad_norm).to(dtype),
        max_grad_norm=max_grad_norm,
        log_variances=torch.tensor(log_variances, dtype=dtype)[:, None],
    )


def as_parameters(flat: torch.Tensor) -> list[torch.Tensor]:
    """``flat [C, P]`` as two "parameters" (a matrix and the rest), so laying them end to end is exercised."""
    split = flat.shape[1] // 2
    return [flat[:, :split].reshape(flat.shape[0], 1, split), flat[:, split:]]
