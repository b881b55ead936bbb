"""Execution credit: the direction branch's value of a trade, priced at the agent's own execution.

A branching network has one value head per branch, and every branch regresses on the return of the joint action
the behaviour took. So the direction branch's value of LONG is an average over the execution the exploration
happened to pick with it (a random magnitude, order type and urgency), not the value of LONG executed as the
agent would execute it. Under momentum a random limit order fills mostly when the next bar goes against the
signal, and an aggressive one pays twice the slippage, so trading is priced under staying flat and a seed can
stop trading altogether (docs/learner.md, "Why a seed stops trading").

Two corrections, each a ``[learner]`` switch:

``execution_regret``
    The direction branch's n-step return gets back what the execution taken lost against the greedy one, as
    the execution branches themselves value it at the sampled state:

        r_dir  +=  Σ_{b shaping the order}  σ_b · (Q'_b(s, g_b) − Q'_b(s, a_b)),    g_b = argmax_a Q_b(s, a)

    with ``Q'`` the target network, ``Q`` the online one (the double-DQN split, so the noise of one network's
    maximum is not added as regret) and ``σ_b`` PopArt's scale of branch ``b`` (Q is normalised per branch).
    The sum is over the branches that shaped the order of the direction taken (:data:`SHAPING`): HOLD places
    none, FLAT's ignores the magnitude. A term is 0 when the execution taken was the greedy one, so a sample
    whose execution the agent would have chosen is left as it was. It costs two forward passes at ``s`` per
    update (one when the target network's ``Q'(s, ·)`` is already computed for a state-value head).
``shaping_only``
    An execution branch learns only from the samples whose order it shaped: the magnitude from LONG and SHORT,
    the order type and urgency from LONG, SHORT and FLAT. A HOLD's return says nothing about how an order
    would have been executed; averaged in, it shrinks the execution branches' advantages towards zero.

A third switch replaces the first one's pricing:

``reward_split``
    Per-branch reward decomposition. The environment writes each step's execution part
    (``foxhunt.env.tables.PS.STEP_EXECUTION``: what the fill and its costs gained or lost against a PASSIVE
    market order for the same contracts), the replay stores it beside the reward, and the n-step returns are
    split by branch (:func:`branch_rewards`): direction and magnitude, which choose the position, get the
    reward minus the execution part, the reward that reference order would have earned; order type and
    urgency, which choose how it is reached, get the execution part. The parts sum to the reward. The
    direction's value of a trade is then priced at one fixed execution, whatever the exploration drew, which
    is what ``execution_regret`` prices at the greedy execution instead, so the two are exclusive.

The config classes keep all three off and the CPU profile (:mod:`foxhunt.profiles`) switches them on: measured on
the default run they end the collapse and lift the weak AR(1), and they trade the random walk more
(docs/learner.md, "Execution credit" and "Execution credit and a 256-bar level").
"""

from __future__ import annotations

import torch

from foxhunt.actions import Branch, Direction

__all__ = ["SHAPING", "EXECUTION_BRANCHES", "shaping_table", "shaping_weights", "execution_regret",
           "execution_columns", "branch_rewards"]

# SHAPING[direction]: the execution branches whose choice changes the order that direction places.
SHAPING: dict[Direction, tuple[Branch, ...]] = {
    Direction.SHORT: (Branch.MAGNITUDE, Branch.ORDER_TYPE, Branch.URGENCY),
    Direction.HOLD: (),
    Direction.LONG: (Branch.MAGNITUDE, Branch.ORDER_TYPE, Branch.URGENCY),
    Direction.FLAT: (Branch.ORDER_TYPE, Branch.URGENCY),
}


# With ``reward_split``: the branches that learn from the execution part of the reward; the others (direction and
# magnitude, which together choose the position) learn from the rest.
EXECUTION_BRANCHES: tuple[Branch, ...] = (Branch.ORDER_TYPE, Branch.URGENCY)


def execution_columns(device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[Branch]``: 1 on the branches that learn from the execution part (:data:`EXECUTION_BRANCHES`), 0 on the others."""
    columns = torch.zeros(Branch.size(), dtype=dtype, device=device)
    for branch in EXECUTION_BRANCHES:
        columns[branch] = 1.0
    return columns


def branch_rewards(rewards: torch.Tensor, executions: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """``[B, Branch]``: each branch's part of the rewards ``[B]``, given their execution parts ``executions [B]``.

    ``columns`` is :func:`execution_columns`: those branches get ``executions``, the others ``rewards −
    executions`` (the reward of the reference PASSIVE market order). Each row sums, over one execution branch and
    one other, to the reward."""
    position = (rewards - executions)[:, None]
    return position + (executions[:, None] - position) * columns[None, :]


def shaping_table(device: torch.device | str | None = None) -> torch.Tensor:
    """``[Direction, Branch]`` bool: whether the branch shapes the order the direction places."""
    table = torch.zeros((Direction.size(), Branch.size()), dtype=torch.bool, device=device)
    for direction, branches in SHAPING.items():
        for branch in branches:
            table[direction, branch] = True
    return table


def shaping_weights(actions: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``[B, Branch]`` bool: the direction branch, and each execution branch that shaped the sample's order.

    ``actions [B, Branch]`` taken; ``table`` :func:`shaping_table` on their device."""
    weights = table[actions[:, Branch.DIRECTION]]  # advanced indexing copies: the table is not written
    weights[:, Branch.DIRECTION] = True
    return weights


def execution_regret(actions: torch.Tensor, q: torch.Tensor, chooser: torch.Tensor, action_mask: torch.Tensor,
                     sigma: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``[B, Branch]``: on the direction column, ``Σ_b σ_b (Q_b(s, g_b) − Q_b(s, a_b))`` over the execution
    branches that shaped the order, ``g_b = argmax_a chooser_b(s, a)``; zero on the other columns.

    ``actions [B, Branch]`` taken; ``q [B, Branch, A]`` the normalised expected Q that values the choices (the
    target network's) and ``chooser [B, Branch, A]`` the one that picks the greedy choice (the online
    network's), both at the sampled state; ``action_mask [Branch, A]`` the real actions; ``sigma [Branch]``
    PopArt's scales; ``table`` :func:`shaping_table`."""
    greedy = chooser.masked_fill(~action_mask, float("-inf")).argmax(-1)  # [B, Branch]
    regret = (q.gather(-1, greedy[..., None]) - q.gather(-1, actions[..., None])).squeeze(-1) * sigma  # [B, Branch]
    shaped = table[actions[:, Branch.DIRECTION]]
    total = torch.where(shaped, regret, torch.zeros_like(regret)).sum(-1)  # [B]
    direction = torch.zeros_like(regret)
    direction[:, Branch.DIRECTION] = 1.0
    return direction * total[:, None]
