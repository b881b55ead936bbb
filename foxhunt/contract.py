"""The shared names: every ISV slot and signal more than one module uses, with its shape, meaning and owner.

Plugins never import each other (``.importlinter``), so the names they share
(the health plugin's ``health.value``, read by five other plugins, the learner
and the environment) used to be string literals spelled again in every
reader. A misspelt reader silently fell back to its default. This module is
the one place each name is spelt: built-in plugins and the core import the
constant, the reads of every component are checked against the frozen layout
(:meth:`foxhunt.plugin.host.PluginHost.kernels` and its siblings),
``foxhunt audit check`` reports a slot nobody reads, and the tables of
docs/adaptive.md are generated from :data:`SHARED` (``foxhunt audit contract``).

Naming a slot here does not declare it: its owner still claims it with
``registrar.slot(name, width=...)`` (the layout, its fingerprint and the
``registry/`` snapshots come from those claims, not from this table);
``tests/test_contract.py`` checks that the built-in plugins declare every slot
here with this width and owner. Signals are the core's own device tensors
(the learner's statistics and the environment's buffers), provided to every
run's kernels and monitors.
"""

from __future__ import annotations

import enum

import attrs

from foxhunt.actions import Branch
from foxhunt.dims import DimTable, auto

__all__ = [
    "CORE",
    "Kind",
    "SharedName",
    "SHARED",
    "SLOTS",
    "SIGNALS",
    "CORE_READ_SLOTS",
    "by_name",
    # ISV slots
    "PROGRESS",
    "HEALTH",
    "HEALTH_RAW",
    "HEALTH_COUNT",
    "HEALTH_Q_MEAN_EMA",
    "HEALTH_GRAD_FAST",
    "HEALTH_GRAD_SLOW",
    "HEALTH_LOSS_FAST",
    "HEALTH_LOSS_SLOW",
    "TAU",
    "GAMMA",
    "EPSILON",
    "EPSILON_FOLD_START",
    "SUPPORT_CENTER",
    "SUPPORT_HALF_WIDTH",
    "SUPPORT_KNOTS",
    "AtomKnot",
    "KNOT_LEVELS",
    "KNOT_EVEN_PLACES",
    "FeatureGroup",
    "GRAD_BALANCE",
    "CQL_ALPHA",
    "CQL_ALPHA_FALLBACK",
    "IQL_SUPPORT_FLOOR",
    "AUXILIARY_RETURN_WEIGHT",
    "AUXILIARY_REGIME_WEIGHT",
    "QUANTILES_WEIGHT",
    "HORIZON_VALUES_WEIGHT",
    "SARSA_TEMPERATURE",
    "SARSA_TEMPERATURE_FALLBACK",
    "PLAN_PARAMS",
    "PLAN_THRESHOLD",
    "VSN_GROUP_SELECTION",
    # signals
    "Q_MEAN",
    "Q_STD",
    "Q_GAP",
    "RETURN_QUANTILES",
    "KNOT_GRADIENT",
    "GREEDY_SHARE",
    "GRAD_NORM",
    "LOSS",
    "BRANCH_GRAD_NORM",
    "COMPONENT_GRAD_NORM",
    "COMPONENT_GRAD_NORM_CLIPPED",
    "SAFETY_CLIPS",
    "PORTFOLIO",
    "ENV_PRICES",
    "ENV_FEATURES",
    "ENV_STATE",
    "ENV_RNG",
    "ENV_ACTIONS",
    "ENV_PARAMS",
    "ENV_HEALTH",
    "ENV_OBS",
    "ENV_REWARD",
    "ENV_DONE",
    "ENV_PLAN",
]

CORE = "foxhunt"  # the owner of what the core itself declares or provides (the plugin name of core_declarations)


class Kind(enum.StrEnum):
    SLOT = "slot"  # float32 lanes of the ISV, claimed by its owner with registrar.slot
    SIGNAL = "signal"  # a device tensor of the core, handed to kernels in KernelContext.signals


@attrs.frozen
class SharedName:
    """One shared name: what it holds, who owns it, and which part of the core reads it ("" when none does)."""

    name: str
    kind: Kind
    shape: str  # as the docs write it: "[1]", "[Branch]", "[envs, PS]"
    width: int | None  # ISV lanes of a slot (the width its owner declares); None for a signal
    owner: str  # the plugin that declares the slot, or CORE for what the core provides
    meaning: str
    core_reader: str = ""  # the core module that reads it: such a slot is read even when no plugin reads it
    dtype: str = "float32"


_BRANCHES = len(Branch)


class AtomKnot(DimTable):
    """The probability levels of the quantile atom spacing's knots (``KNOT_LEVELS``, in this order): the columns
    of ``learner.return_quantiles [Branch, AtomKnot]``, of ``learner.knot_gradient [Branch, AtomKnot]`` and of each
    branch's row of ``support.knots``. Shared by the
    learner (:mod:`foxhunt.learner.atoms`) and the support plugin, so it is spelt here."""

    P05 = auto()
    P25 = auto()
    P50 = auto()
    P75 = auto()
    P95 = auto()


KNOT_LEVELS: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)  # in AtomKnot order


class FeatureGroup(DimTable):
    """What an observation column describes, for encoders that weigh kinds of input against each other (the ``vsn``
    encoder's per-group selection weights). Every feature family names one of the first four; the environment's
    portfolio columns are ``PORTFOLIO``, and the ISV lanes ``[learner] isv_context`` appends are ``ISV_CONTEXT``."""

    MARKET = auto()  # prices, returns, volatility, volume and the calendar of the bars themselves
    ORDER_FLOW = auto()  # who traded or queued against whom: order-flow and trade imbalances, intensity, depletion
    BOOK = auto()  # the resting book at the bar close: spread, level sizes, depth imbalances
    MULTI_TIMEFRAME = auto()  # aggregates over completed blocks of several bars
    PORTFOLIO = auto()  # the agent's own position and limits (the environment's columns, not a feature family)
    ISV_CONTEXT = auto()  # the learning system's own state: the ISV slots [learner] isv_context appends


# Where an even spacing puts each level p, 2p − 1: ``support.knots`` holds each knot's offset from it (0 = even).
KNOT_EVEN_PLACES: tuple[float, ...] = tuple(2.0 * level - 1.0 for level in KNOT_LEVELS)
_ATOM_KNOTS = AtomKnot.size()


def _slot(name: str, owner: str, meaning: str, *, width: int = 1, core_reader: str = "",
          shape: str = "") -> SharedName:
    shape = shape or ("[Branch]" if width == _BRANCHES else f"[{width}]")
    return SharedName(name, Kind.SLOT, shape, width, owner, meaning, core_reader)


def _signal(name: str, shape: str, meaning: str, *, dtype: str = "float32") -> SharedName:
    return SharedName(name, Kind.SIGNAL, shape, None, CORE, meaning, dtype=dtype)


# -- ISV slots --------------------------------------------------------------------------------
PROGRESS = "train.progress"
HEALTH = "health.value"
HEALTH_RAW = "health.raw"
HEALTH_COUNT = "health.count"
HEALTH_Q_MEAN_EMA = "health.q_mean_ema"
HEALTH_GRAD_FAST = "health.grad_fast"
HEALTH_GRAD_SLOW = "health.grad_slow"
HEALTH_LOSS_FAST = "health.loss_fast"
HEALTH_LOSS_SLOW = "health.loss_slow"
TAU = "tau.value"
GAMMA = "gamma.branch"
EPSILON = "epsilon.branch"
EPSILON_FOLD_START = "epsilon.fold_start"
SUPPORT_CENTER = "support.center"
SUPPORT_HALF_WIDTH = "support.half_width"
SUPPORT_KNOTS = "support.knots"
GRAD_BALANCE = "grad_balance.scale"
CQL_ALPHA = "cql.alpha"
# α when no plugin declares cql.alpha, and the static plugin's default. Its one key is [plugins.static] cql_alpha;
# the learner has no key of its own, so two keys can no longer disagree.
CQL_ALPHA_FALLBACK = 0.1
IQL_SUPPORT_FLOOR = "iql.support_floor"
AUXILIARY_RETURN_WEIGHT = "auxiliary.return_weight"
AUXILIARY_REGIME_WEIGHT = "auxiliary.regime_weight"
QUANTILES_WEIGHT = "quantiles.weight"
HORIZON_VALUES_WEIGHT = "horizon_values.weight"
SARSA_TEMPERATURE = "sarsa.temperature"
# τ of the Expected-SARSA target policy when no plugin declares sarsa.temperature, and the expected_sarsa plugin's
# default; its one key is [plugins.expected_sarsa] temperature (read only with [learner] target_policy =
# "expected_sarsa").
SARSA_TEMPERATURE_FALLBACK = 1.0
# Trade plans (the trade_plans plugin): read by its environment kernel, foxhunt.env.plans.run_plan_step.
PLAN_PARAMS = "trade_plans.params"
PLAN_THRESHOLD = "trade_plans.threshold"
# The vsn encoder's per-group selection weights: written by the encoder (Encoder.slot_values), read by its monitor.
VSN_GROUP_SELECTION = "vsn.group_selection"
_PLAN_PARAMS_WIDTH = 3  # foxhunt.env.tables.PLAN_PARAM.size(), spelt here: the env package imports this module

# -- signals ----------------------------------------------------------------------------------
Q_MEAN = "learner.q_mean"
Q_STD = "learner.q_std"
Q_GAP = "learner.q_gap"
RETURN_QUANTILES = "learner.return_quantiles"
KNOT_GRADIENT = "learner.knot_gradient"
GREEDY_SHARE = "learner.greedy_share"
GRAD_NORM = "learner.grad_norm"
LOSS = "learner.loss"
BRANCH_GRAD_NORM = "learner.branch_grad_norm"
COMPONENT_GRAD_NORM = "learner.component_grad_norm"
COMPONENT_GRAD_NORM_CLIPPED = "learner.component_grad_norm_clipped"
SAFETY_CLIPS = "learner.safety_clips"
PORTFOLIO = "env.portfolio"
# The environment kernel's buffers (foxhunt.env.VectorEnv's context; foxhunt.env.kernel passes them in this order).
ENV_PRICES = "env.prices"
ENV_FEATURES = "env.features"
ENV_STATE = "env.state"
ENV_RNG = "env.rng"
ENV_ACTIONS = "env.actions"
ENV_PARAMS = "env.params"
ENV_HEALTH = "env.health"
ENV_OBS = "env.obs"
ENV_REWARD = "env.reward"
ENV_DONE = "env.done"
ENV_PLAN = "env.plan"

SHARED: tuple[SharedName, ...] = (
    _slot(PROGRESS, CORE, "training progress within the fold in [0, 1] = epoch / epochs (written at epoch boundaries)"),
    _slot(HEALTH, "health", "learning health in [0, 1]: EMA of health.raw",
          core_reader="the learner (LossInputs.health), the environment (position safety), diagnostics (health gauge)"),
    _slot(HEALTH_RAW, "health", "this update's health: weighted geometric mean of the five symptom scores"),
    _slot(HEALTH_COUNT, "health", "observations since the fold start (warms the symptom EMAs up)"),
    _slot(HEALTH_Q_MEAN_EMA, "health", "slow EMA of learner.q_mean per branch (the Q-drift reference)", width=_BRANCHES),
    _slot(HEALTH_GRAD_FAST, "health", "fast EMA of learner.grad_norm"),
    _slot(HEALTH_GRAD_SLOW, "health", "slow EMA of learner.grad_norm"),
    _slot(HEALTH_LOSS_FAST, "health", "fast EMA of learner.loss"),
    _slot(HEALTH_LOSS_SLOW, "health", "slow EMA of learner.loss"),
    _slot(TAU, "tau", "Polyak target-update rate τ", core_reader="the learner (target update)"),
    _slot(GAMMA, "gamma", "discount per branch", width=_BRANCHES, core_reader="the learner (bootstrap targets)"),
    _slot(EPSILON, "epsilon", "exploration rate per branch", width=_BRANCHES, core_reader="the trainer (exploration)"),
    _slot(EPSILON_FOLD_START, "epsilon", "the step counter at the fold's start (the schedule's origin)"),
    _slot(SUPPORT_CENTER, "support", "centre of the C51 atom support per branch (normalised return units)",
          width=_BRANCHES, core_reader="the learner (atom positions)"),
    _slot(SUPPORT_HALF_WIDTH, "support", "half width of the C51 atom support per branch: atoms span centre ± it",
          width=_BRANCHES, core_reader="the learner (atom positions)"),
    _slot(SUPPORT_KNOTS, "support", "where the atoms' quantile knots sit inside each branch's support, as offsets "
          "from an even spacing [Branch × AtomKnot] (read with [learner] atom_spacing = \"quantile\" or \"learned\")",
          width=_BRANCHES * _ATOM_KNOTS, shape="[Branch × AtomKnot]",
          core_reader="the learner (atom positions, quantile and learned spacings)"),
    _slot(GRAD_BALANCE, "grad_balance", "weight of each branch in every loss's branch average", width=_BRANCHES,
          core_reader="the learner (branch averages)"),
    _slot(CQL_ALPHA, "static", "conservative-penalty strength", core_reader="the learner (CQL term)"),
    # Read by the learner only through the iql component's CentredSupport (so only when that opt-in plugin is on).
    _slot(IQL_SUPPORT_FLOOR, "iql", "minimum half-width of the C51 atoms centred per sample on the IQL value head's "
          "V(s) (normalised return units)", width=_BRANCHES),
    # Read by the auxiliary plugin's own loss components (only when that opt-in plugin is on).
    _slot(AUXILIARY_RETURN_WEIGHT, "auxiliary", "weight of the next-bar-return task's loss before its gradient budget"),
    _slot(AUXILIARY_REGIME_WEIGHT, "auxiliary", "weight of the regime task's loss before its gradient budget"),
    # Read by the quantiles and horizon_values plugins' own loss components (only when each opt-in plugin is on).
    _slot(QUANTILES_WEIGHT, "quantiles", "weight of the fixed-level quantile head's loss before its gradient budget"),
    _slot(HORIZON_VALUES_WEIGHT, "horizon_values", "weight of the per-branch V_short/V_long decoders' loss before "
          "its gradient budget"),
    _slot(SARSA_TEMPERATURE, "expected_sarsa", "softmax temperature τ of the Expected-SARSA target policy per branch "
          "(normalised Q units)", width=_BRANCHES, core_reader="the learner (Expected-SARSA targets)"),
    # Written at epoch boundaries by the vsn encoder and read by its vsn.selection monitor (runs that select vsn).
    _slot(VSN_GROUP_SELECTION, "vsn", "mean selection weight of each feature group's variables in the vsn encoder "
          "(0 for a group the run has no input of; they sum to 1)", width=FeatureGroup.size(), shape="[FeatureGroup]"),
    _slot(PLAN_PARAMS, "trade_plans", "trade plans' stop and target distances (fractions of the entry price) and "
          "horizon (bars), the columns of `foxhunt.env.tables.PLAN_PARAM`; 0 turns one off",
          width=_PLAN_PARAMS_WIDTH, shape="[PLAN_PARAM]"),
    _slot(PLAN_THRESHOLD, "trade_plans", "conviction a position's entry needs for a trade plan to open with it "
          "(share of the cap: 0.25, 0.5 or 1)"),
    _signal(Q_MEAN, "[Branch]", "batch mean of the expected Q of the greedy action per branch (normalised return units)"),
    _signal(Q_STD, "[Branch]", "batch standard deviation of the same"),
    _signal(RETURN_QUANTILES, "[Branch, AtomKnot]", "batch quantiles of each branch's n-step target r + γ^m E[Z'] "
            "at the AtomKnot levels (normalised return units)"),
    _signal(KNOT_GRADIENT, "[Branch, AtomKnot]", "gradient of the batch's C51 projection error (squared Cramér "
            "distance, in support half-widths, times N − 1) with respect to each support.knots offset"),
    _signal(Q_GAP, "[Branch]", "batch mean of (max − mean) of the expected Q over the branch's actions"),
    _signal(GREEDY_SHARE, "[Branch]", "share of the batch whose greedy action is the branch's most common one (1: one action everywhere)"),
    _signal(GRAD_NORM, "[1]", "combined gradient norm after the budget clips (`GradientBudget.combined_norm`)"),
    _signal(LOSS, "[1]", "total loss of the update (sum of the components)"),
    _signal(BRANCH_GRAD_NORM, "[Branch]", "norm of each branch's gradient as scaled by `grad_balance.scale` in that update"),
    _signal(PORTFOLIO, "[envs, PS]", "the environment's portfolio-state table (`foxhunt.env.tables.PS`), any float dtype"),
    _signal(COMPONENT_GRAD_NORM, "[components]", "pre-clip norm per loss component (`GradientBudget.component_norms`)"),
    _signal(COMPONENT_GRAD_NORM_CLIPPED, "[components]", "the same after each budget clip"),
    _signal(SAFETY_CLIPS, "[]", "running count of optimiser safety-clip firings", dtype="int64"),
    _signal(ENV_PRICES, "[bars, OHLCV]", "the fold's bars (`foxhunt.data.market.OHLCV` columns)", dtype="float (the state dtype)"),
    _signal(ENV_FEATURES, "[bars, features]", "the normalised feature matrix of the fold", dtype="float32"),
    _signal(ENV_STATE, "[envs, PS]", "the portfolio-state table the environment kernel advances (the tensor `env.portfolio` names)", dtype="float (the state dtype)"),
    _signal(ENV_RNG, "[envs, RNG]", "per-environment counter-based random streams", dtype="int64"),
    _signal(ENV_ACTIONS, "[envs, Branch]", "the actions of the step, one sub-action per branch", dtype="int64"),
    _signal(ENV_PARAMS, "[EP]", "the environment's parameters (`foxhunt.env.tables.EP`)", dtype="float (the state dtype)"),
    _signal(ENV_HEALTH, "[1]", "learning health as the environment reads it (a view of `health.value`, or 1.0)", dtype="float32"),
    _signal(ENV_OBS, "[envs, features + PortfolioObs]", "the observation the step writes", dtype="float32"),
    _signal(ENV_REWARD, "[envs]", "the reward the step writes", dtype="float (the state dtype)"),
    _signal(ENV_DONE, "[envs]", "episode ends the step writes", dtype="bool"),
    _signal(ENV_PLAN, "[envs, PLAN]", "each environment's trade plan (`foxhunt.env.tables.PLAN`; all 0 when none is "
            "open), written by the trade_plans plugin's step", dtype="float (the state dtype)"),
)

SLOTS: tuple[SharedName, ...] = tuple(entry for entry in SHARED if entry.kind is Kind.SLOT)
SIGNALS: tuple[SharedName, ...] = tuple(entry for entry in SHARED if entry.kind is Kind.SIGNAL)
# Slots some part of the core reads: a run reads them whatever plugin reads them too (foxhunt audit check).
CORE_READ_SLOTS: frozenset[str] = frozenset(entry.name for entry in SLOTS if entry.core_reader)
_BY_NAME = {entry.name: entry for entry in SHARED}


def by_name(name: str) -> SharedName:
    """The entry of ``name``; ``KeyError`` naming the known names when it is not a shared name."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a shared name of foxhunt.contract (known: {', '.join(sorted(_BY_NAME))})") from None
