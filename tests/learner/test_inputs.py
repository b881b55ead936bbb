"""``LossInputs.taken``: the taken action of each branch, exactly what a gather gives, forward and backward."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from foxhunt.learner.inputs import LossInputs


def gathered(values: torch.Tensor, actions: torch.Tensor, action_dim: int) -> torch.Tensor:
    """The reference: ``torch.gather`` along the action axis."""
    shape = [actions.shape[0]] + [1] * (action_dim - 2) + [actions.shape[1], 1] + [1] * (values.dim() - action_dim - 1)
    index = actions.view(shape).expand(*values.shape[:action_dim], 1, *values.shape[action_dim + 1:])
    return values.gather(action_dim, index).squeeze(action_dim)


@given(seed=st.integers(0, 2**32 - 1), layout=st.sampled_from(["atoms", "q", "quantiles"]))
def test_taken_is_the_gather_exactly_with_padded_actions_at_minus_infinity(seed: int, layout: str) -> None:
    rng = np.random.default_rng(seed)
    batch, branches, actions_wide, extra = (int(v) for v in rng.integers(1, 6, 4))
    sizes = rng.integers(1, actions_wide + 1, branches)  # each branch's real actions; the rest are padding
    shape, action_dim = {
        "atoms": ((batch, branches, actions_wide, extra), 2),  # log_probs [B, Branch, A, N]
        "q": ((batch, branches, actions_wide), 2),  # q [B, Branch, A]
        "quantiles": ((batch, extra, branches, actions_wide), 3),  # quantiles [B, T, Branch, A]
    }[layout]
    values = torch.tensor(rng.normal(size=shape), dtype=torch.float32)
    padded = torch.arange(actions_wide)[None, :] >= torch.tensor(sizes)[:, None]  # [Branch, A]
    pad_index = [None] * (action_dim - 1) + [slice(None), slice(None)] + [None] * (values.dim() - action_dim - 1)
    values = values.masked_fill(padded[tuple(pad_index)], float("-inf"))
    actions = torch.tensor((rng.uniform(size=(batch, branches)) * sizes).astype(np.int64))
    inputs = SimpleNamespace(batch=SimpleNamespace(actions=actions))

    chosen = [values.clone().requires_grad_(True) for _ in range(2)]
    got = LossInputs.taken(inputs, chosen[0], action_dim)
    want = gathered(chosen[1], actions, action_dim)
    assert torch.equal(got, want)
    cotangent = torch.tensor(rng.normal(size=tuple(want.shape)), dtype=torch.float32)
    (got_grad,) = torch.autograd.grad(got, chosen[0], cotangent)
    (want_grad,) = torch.autograd.grad(want, chosen[1], cotangent)
    assert torch.equal(got_grad, want_grad)
