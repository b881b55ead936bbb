"""The batch statistics of the expected Q that the learner hands to the adaptive kernels."""

from __future__ import annotations

import torch

from foxhunt.learner.functional import q_statistics

NEG_INF = float("-inf")


def test_greedy_share_counts_the_most_common_greedy_action_and_never_a_padded_one() -> None:
    # 4 states, 2 branches, up to 3 actions; branch 1 has 2 real actions (the third is padding at -inf)
    q = torch.tensor(
        [
            [[0.0, 1.0, 0.5], [2.0, 1.0, NEG_INF]],
            [[0.0, 1.0, 0.5], [2.0, 1.0, NEG_INF]],
            [[3.0, 1.0, 0.5], [2.0, 1.0, NEG_INF]],
            [[0.0, 0.0, 4.0], [2.0, 1.0, NEG_INF]],
        ],
        dtype=torch.float64,
    )
    mask = torch.tensor([[True, True, True], [True, True, False]])
    n_valid = mask.sum(-1).to(torch.float64)
    q_mean, q_std, q_gap, greedy_share = q_statistics(q, mask, n_valid)
    # branch 0: actions 1, 1, 0, 2 -> the most common is taken by half; branch 1: one action everywhere
    torch.testing.assert_close(greedy_share, torch.tensor([0.5, 1.0], dtype=torch.float64))
    torch.testing.assert_close(q_mean, torch.tensor([(1.0 + 1.0 + 3.0 + 4.0) / 4, 2.0], dtype=torch.float64))
    torch.testing.assert_close(q_gap[1], torch.tensor(0.5, dtype=torch.float64))
    assert q_std.shape == (2,)
