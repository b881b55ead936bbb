"""Hindsight magnitude relabelling: a transition taught again with the size that would have paid best.

Off by default (``[plugins.hindsight] enabled = false``): a new mechanism, not yet shown to help
(docs/learner.md, "Replay augmentations"). Switched on, a share ``fraction`` of each sampled batch is
replaced by a relabelled copy: the magnitude sub-action becomes the one whose one-step reward, under the
environment's cost model and the realised next bar, is highest, and the return is adjusted by what that
choice would have gained.

**What is best, precisely.** Only a SHORT or LONG market order's magnitude changes what happens (HOLD and
FLAT ignore it; a limit order's fill depends on the bar's path, which the replay does not keep), so only
those transitions are relabelled, and only when the taken target is not zero. For magnitude ``m`` the
target is the environment's (``foxhunt.env.physics.target_position``): ``T(m) = ±min(ceil(share_m × cap −
ε), cap)`` with shares ¼, ½, 1 and the cap the decision saw. Its one-step reward under the cost model
(``env_step_row``) is

    r(T) = (w_pnl × T × u − w_cost × k × |T − p₀| − w_holding × |T|) / reward_scale

with ``p₀`` the position before the decision, ``k`` the market order's cost per contract at the taken
urgency (half spread and slippage times the multiplier, plus commission) and ``u`` the next bar's P&L per
contract held. The best magnitude maximises ``r(T(m))`` (the smallest of equals; the taken one is kept
unless another is strictly better), and the relabelled return is the original plus
``r(T(best)) − r(T(taken))`` (the first term of the n-step return is the one-step reward).

**What the replay stores, and the approximation.** The replay keeps observations, actions and rewards,
not prices. ``p₀`` and the cap are read from the observation's portfolio columns (``PortfolioObs``,
whole contracts over ``max_contracts``); ``k``, the weights and the scale from the environment's
parameters (``EP``). The move ``u`` is inferred from the realised reward by inverting ``r(T(taken))``.
That inversion, and so the relabelling, is exact when

- the churn and drawdown penalties are off (``w_churn = w_drawdown = 0``, the defaults; otherwise they
  are held at their realised values), and
- the position before the decision was flat, or the next bar opens at the decision bar's close (with a
  gap, the held position earns close-to-close and the traded contracts open-to-close; ``u`` then blends
  the two).

The later steps of an n-step return and the bootstrap observation stay those of the size taken.

**With the reward split by branch** (``[learner] reward_split``, ``AugmentationFold.execution_branches``), each branch's
return moves by its own part of that gain. A market order's fill is the reference execution's, so its execution
part is only the cost it paid beyond a PASSIVE market order's, ``w_cost × (k_PASSIVE − k) × |T − p₀| / scale``:
order type and urgency get that part's change, direction and magnitude the rest.
``tests/builtin_plugins/augmentations/test_hindsight.py`` checks the relabelling against a float64 transcription
of the environment's reward on random inputs where it is exact.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import attrs
import numpy as np
import torch

from foxhunt import AugmentationFold, AugmentationInputs, Branch, ReplayAugmentation, hookimpl
from foxhunt.actions import Direction, Magnitude, OrderType, Urgency
from foxhunt.env.tables import EP, PortfolioObs

__all__ = ["NAME", "HindsightSettings", "MAGNITUDE_SHARES", "CONTRACT_EPSILON", "hindsight_constants",
           "relabel_magnitude", "foxhunt_declare", "foxhunt_replay_augmentations"]

NAME = "hindsight"
# The environment's share of the cap per magnitude (foxhunt.env.physics.target_position) and its rounding slack.
MAGNITUDE_SHARES = {Magnitude.QUARTER: 0.25, Magnitude.HALF: 0.5, Magnitude.FULL: 1.0}
CONTRACT_EPSILON = 1e-6
# Plain ints for the codes compared inside the traced function: dynamo folds a tensor compared with an IntEnum
# member into a Python bool.
LONG, SHORT, MARKET = int(Direction.LONG), int(Direction.SHORT), int(OrderType.MARKET)
PASSIVE = int(Urgency.PASSIVE)
MAGNITUDE_COLUMN = int(Branch.MAGNITUDE)
SLIPPAGE_BY_URGENCY = {Urgency.PASSIVE: EP.SLIP_PASSIVE, Urgency.NORMAL: EP.SLIP_NORMAL,
                       Urgency.AGGRESSIVE: EP.SLIP_AGGRESSIVE}


@attrs.frozen
class HindsightSettings:
    """``[plugins.hindsight]``: the switch (off by default) and the share of each batch relabelled."""

    enabled: bool = False
    fraction: float = attrs.field(default=0.25, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)])


def hindsight_constants(fold: AugmentationFold) -> dict[str, np.ndarray]:
    """The cost model's constants from the environment's parameters ``[EP]``: a market order's cost per
    contract at each urgency ``[Urgency]``, the reward weights and scale, the contract count the
    observation divides positions by, and each magnitude's share of the cap ``[Magnitude]``."""
    params = np.asarray(fold.env_params, dtype=np.float64)
    slippage = np.array([params[SLIPPAGE_BY_URGENCY[urgency]] for urgency in Urgency])
    adverse = params[EP.HALF_SPREAD] + params[EP.SLIPPAGE] * slippage
    return {
        "cost": adverse * params[EP.MULTIPLIER] + params[EP.COMMISSION],
        "w_pnl": np.asarray(params[EP.W_PNL]),
        "w_cost": np.asarray(params[EP.W_COST]),
        "w_holding": np.asarray(params[EP.W_HOLDING]),
        "reward_scale": np.asarray(params[EP.REWARD_SCALE]),
        "max_contracts": np.asarray(params[EP.MAX_CONTRACTS]),
        "shares": np.array([MAGNITUDE_SHARES[magnitude] for magnitude in Magnitude]),
        # [learner] reward_split: 1.0 splits the gain by branch; the branches that take the execution part
        "split": np.asarray(1.0 if fold.execution_branches else 0.0),
        "execution_columns": np.array([1.0 if branch in fold.execution_branches else 0.0 for branch in Branch]),
    }


def relabel_magnitude(inputs: AugmentationInputs) -> Any:
    """The selected SHORT/LONG market orders relabelled with their best magnitude in hindsight, returns adjusted."""
    batch, t = inputs.batch, inputs.tensors
    portfolio = len(PortfolioObs)  # the portfolio columns close every observation (an encoder window's too)
    p0 = torch.round(batch.obs[:, PortfolioObs.POSITION - portfolio] * t["max_contracts"])  # [B] contracts
    cap = torch.round(batch.obs[:, PortfolioObs.CAP - portfolio] * t["max_contracts"])  # [B]
    actions = batch.actions
    direction, magnitude = actions[:, Branch.DIRECTION], actions[:, Branch.MAGNITUDE]
    side = torch.where(direction == LONG, 1.0, -1.0).to(p0.dtype)  # [B]
    size = torch.ceil(t["shares"][None, :] * cap[:, None] - CONTRACT_EPSILON)  # [B, Magnitude]
    targets = side[:, None] * torch.minimum(size, cap[:, None])  # [B, Magnitude]
    cost = t["cost"][actions[:, Branch.URGENCY]]  # [B]
    taken = targets.gather(1, magnitude[:, None])[:, 0]  # [B]
    w_pnl, w_cost, w_holding, scale = t["w_pnl"], t["w_cost"], t["w_holding"], t["reward_scale"]
    eligible = (inputs.selected[:, 0] & ((direction == LONG) | (direction == SHORT))
                & (actions[:, Branch.ORDER_TYPE] == MARKET) & (taken != 0) & (w_pnl != 0))
    # the next bar's P&L per contract held, from inverting the taken size's reward (exact where the docs say)
    known = w_cost * cost * (taken - p0).abs() + w_holding * taken.abs()
    held = torch.where(eligible, w_pnl * taken, torch.ones_like(taken))
    move = torch.where(eligible, (inputs.rewards.to(p0.dtype) * scale + known) / held, torch.zeros_like(taken))
    rewards = (w_pnl * targets * move[:, None] - w_cost * cost[:, None] * (targets - p0[:, None]).abs()
               - w_holding * targets.abs()) / scale  # [B, Magnitude]: r(T(m))
    best = rewards.argmax(1)  # the first of equal maxima: the smallest size
    gain = rewards.gather(1, best[:, None])[:, 0] - rewards.gather(1, magnitude[:, None])[:, 0]
    relabel = eligible & (gain > 0)
    column = torch.arange(actions.shape[1], device=actions.device) == MAGNITUDE_COLUMN
    new_actions = torch.where(relabel[:, None] & column[None, :], best[:, None], actions)
    # the execution part of r(T(m)): the cost beyond a PASSIVE market order's (0 for every branch without a split)
    executions = w_cost * (t["cost"][PASSIVE] - cost)[:, None] * (targets - p0[:, None]).abs() / scale
    execution_gain = t["split"] * (executions.gather(1, best[:, None])[:, 0]
                                   - executions.gather(1, magnitude[:, None])[:, 0])
    position_gain = gain - execution_gain
    mine = position_gain[:, None] + (execution_gain + (1.0 - t["split"]) * position_gain
                                     - position_gain)[:, None] * t["execution_columns"][None, :]
    returns = batch.returns + torch.where(relabel[:, None], mine, torch.zeros_like(mine)).to(batch.returns.dtype)
    return dataclasses.replace(batch, actions=new_actions, returns=returns)


@hookimpl
def foxhunt_declare(registrar: Any) -> None:
    registrar.settings(HindsightSettings)


@hookimpl
def foxhunt_replay_augmentations(config: Any, settings: HindsightSettings) -> list[ReplayAugmentation]:
    if not settings.enabled:
        return []
    return [
        ReplayAugmentation(
            name=NAME,
            augment=relabel_magnitude,
            fraction=settings.fraction,
            prepare=hindsight_constants,
            description="hindsight magnitude relabelling: a share of each batch's SHORT/LONG market orders "
                        "relabelled with the size whose one-step reward was highest, the return adjusted",
        )
    ]
