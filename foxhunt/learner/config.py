"""``[learner]`` and ``[learner.replay]`` config: attrs frozen classes, plain types only (cattrs-friendly).

Values here are the *fallbacks* for everything an adaptive kernel may move at run
time: when the ISV layout has the slot (``tau.value``, ``gamma.branch``,
``support.center`` ...), the learner reads the live slot instead (see
:mod:`foxhunt.learner.slots`).
"""

from __future__ import annotations

import math
from typing import Any

import attrs

# [learner] atom_spacing's choices (foxhunt.learner.atoms)
ATOM_SPACINGS = ("uniform", "quantile", "learned")

__all__ = ["LearnerConfig", "ReplayConfig", "learner_config_of"]


def _finite(instance: object, attribute: attrs.Attribute, value: float) -> None:
    # attrs' gt/ge let inf through (inf > 0); a rate or a bound of inf runs and produces nonsense
    if not math.isfinite(value):
        raise ValueError(f"'{attribute.name}' must be finite: {value!r}")


def _positive_ints(instance: object, attribute: attrs.Attribute, value: tuple[int, ...]) -> None:
    if not value or any(width <= 0 for width in value):
        raise ValueError(f"'{attribute.name}' must list one or more layer widths, each > 0: {list(value)!r}")


def _distinct_names(instance: object, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    if any(not name for name in value) or len(set(value)) != len(value):
        raise ValueError(f"'{attribute.name}' must list distinct, non-empty ISV slot names: {list(value)!r}")


def _adam_betas(instance: object, attribute: attrs.Attribute, value: tuple[float, float]) -> None:
    if not all(0.0 <= beta < 1.0 for beta in value):
        raise ValueError(f"'{attribute.name}' must be two decay rates, each in [0, 1): {list(value)!r}")


_positive = attrs.validators.gt(0)
_non_negative = attrs.validators.ge(0)
_unit = [attrs.validators.ge(0.0), attrs.validators.le(1.0)]
_positive_finite = [_finite, _positive]
_non_negative_finite = [_finite, _non_negative]


def _int_tuple(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _budget_dict(value: Any) -> dict[str, float]:
    return {str(name): float(budget) for name, budget in dict(value).items()}


@attrs.frozen
class ReplayConfig:
    """Device-resident replay: ring buffer of ``capacity`` transitions, n-step returns, optional priorities."""

    capacity: int = attrs.field(default=65_536, validator=_positive)  # per run; sized for a CPU default run
    prioritized: bool = True
    alpha: float = attrs.field(default=0.6, validator=_unit)  # priority exponent at step 0
    alpha_final: float = attrs.field(default=0.6, validator=_unit)
    beta: float = attrs.field(default=0.4, validator=_unit)  # importance-weight exponent at step 0
    beta_final: float = attrs.field(default=1.0, validator=_unit)
    anneal_steps: int = attrs.field(default=100_000, validator=_positive)  # α and β reach their finals here
    priority_eps: float = attrs.field(default=1e-6, validator=_positive_finite)  # keeps every stored transition sampleable


REMOVED_GRAD_MODES = {
    "batched": (
        'learner.grad_mode = "batched" was removed: one vmapped vjp over every loss was slower than the per-component '
        'gradients in every measurement (CPU and H200, eager and compiled; docs/learner.md, "Performance"). Use '
        '"loop" (the default, the same gradients), and [learner] compile = true for the fused update'
    ),
}


def _grad_mode(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value in REMOVED_GRAD_MODES:
        raise ValueError(REMOVED_GRAD_MODES[value])
    if value != "loop":
        raise ValueError(f'learner.grad_mode must be "loop", got {value!r}')


@attrs.frozen
class LearnerConfig:
    """Network shape, the loss terms' shared settings, optimisation and replay of the learner."""

    # network
    hidden: tuple[int, ...] = attrs.field(default=(128, 128), converter=_int_tuple, validator=_positive_ints)
    head_hidden: int = attrs.field(default=64, validator=_positive)
    n_atoms: int = attrs.field(default=51, validator=attrs.validators.ge(2))
    v_min: float = -10.0  # fixed support when the ISV has no support.* slots (normalised return units)
    v_max: float = 10.0
    # where the atoms sit inside each branch's support: "uniform" (even), "quantile" (dense where the n-step targets
    # are) or "learned" (knots moved by gradient descent on the projection error), both from the support kernel's
    # support.knots (foxhunt.learner.atoms). uniform stays the default until an ablation shows another learns better
    # (docs/learner.md, "Atom spacing")
    atom_spacing: str = attrs.field(default="uniform", validator=attrs.validators.in_(ATOM_SPACINGS))
    # share of an even spacing blended into the quantile and learned spacings: > 0 keeps every gap positive and atoms in the tails
    atom_spacing_mix: float = attrs.field(default=0.25, validator=[_finite, attrs.validators.gt(0.0),
                                                                     attrs.validators.le(1.0)])
    n_quantiles: int = attrs.field(default=8, validator=_positive)  # IQN τ samples for the online net
    n_target_quantiles: int = attrs.field(default=8, validator=_positive)
    n_cos: int = attrs.field(default=64, validator=_positive)  # cosine embedding size of τ
    ensemble_size: int = attrs.field(default=5, validator=attrs.validators.ge(2))
    sigma_max: float = attrs.field(default=4.0, validator=_positive_finite)  # spectral-norm bound of every weight
    power_iterations: int = attrs.field(default=2, validator=_positive)  # per update; construction runs 50
    # losses
    gamma: float = attrs.field(default=0.99, validator=_unit)  # fallback of gamma.branch
    n_step: int = attrs.field(default=3, validator=_positive)
    # a second, shorter horizon: each sampled transition's return runs over n_step_mix steps or over n_step, drawn
    # at random with equal odds; 0 (the default) is off (docs/learner.md, "Mixed return horizons")
    n_step_mix: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    # Each loss component's own hyperparameters are its plugin's settings ([plugins.<name>], docs/learner.md).
    # What stays here spans the components: their gradient budgets, and which one's per-sample TD error
    # drives the replay priorities (a choice among the enabled components, made by the learner).
    budgets: dict[str, float] = attrs.field(factory=dict, converter=_budget_dict)  # overrides component defaults
    priority_component: str = "c51"  # whose per-sample TD error feeds replay priorities
    # How the components' isolated gradients become one: a combiner some loaded plugin provides (the core's
    # "budgeted_sum", the built-in plugins' "pcgrad" and "uncertainty"); checked when the plugins are frozen.
    # budgeted_sum stays the default until an ablation shows another learns better (docs/learner.md, "Gradient
    # combiners", says why and gives the command).
    combiner: str = attrs.field(default="budgeted_sum", validator=attrs.validators.min_len(1))
    # What turns the last W bars into the trunk's input: an encoder some loaded plugin provides (the core's
    # "mlp", one bar, and the built-in "attention" and "scan"); checked when the plugins are frozen. mlp stays
    # the default until the encoder ablation shows another learns better (docs/learner.md, "Encoders").
    encoder: str = attrs.field(default="mlp", validator=attrs.validators.min_len(1))
    # ISV slots appended to every encoder input, read live at each forward (foxhunt.learner.context): the learning
    # system's own state as inputs, the vsn encoder's ISV_CONTEXT group. Empty: nothing appended, the network as
    # without context. Checked against the run's slots when the learner is built.
    isv_context: tuple[str, ...] = attrs.field(default=(), converter=tuple, validator=_distinct_names)
    # optimisation
    # Adam moves each weight by about lr per update: above 1 no network here can learn (weights are bounded by sigma_max)
    lr: float = attrs.field(default=3e-4, validator=[_finite, _positive, attrs.validators.le(1.0)])
    lr_min: float = attrs.field(default=1e-5, validator=[_finite, _non_negative, attrs.validators.le(1.0)])
    lr_schedule: str = attrs.field(default="constant", validator=attrs.validators.in_(("constant", "cosine")))
    restart_period: int = attrs.field(default=10_000, validator=_positive)  # first cosine cycle, in updates
    restart_mult: int = attrs.field(default=1, validator=_positive)  # each cycle is this many times longer
    weight_decay: float = attrs.field(default=1e-5, validator=_non_negative_finite)
    # which parameters AdamW decays: "all", or "trunk" (the encoder's and the trunk's, the representation every head
    # shares; the heads keep their scale). docs/learner.md, "Weight decay on the trunk"
    weight_decay_scope: str = attrs.field(default="all", validator=attrs.validators.in_(("all", "trunk")))
    adam_betas: tuple[float, float] = attrs.field(default=(0.9, 0.999), validator=_adam_betas)
    adam_eps: float = attrs.field(default=1e-8, validator=[_positive, attrs.validators.lt(1.0)])
    max_grad_norm: float = attrs.field(default=10.0, validator=_positive_finite)
    tau: float = attrs.field(default=0.005, validator=_unit)  # fallback of tau.value (Polyak rate)
    popart: bool = True
    popart_beta: float = attrs.field(default=3e-4, validator=_unit)  # EMA rate of the return statistics
    popart_sigma_min: float = attrs.field(default=1e-4, validator=_positive_finite)
    # which statistics PopArt tracks: "moments" (mean and second moment) or "robust" (running median and
    # interquartile range); robust is off by default, no better on mean reversion (docs/learner.md, "Robust PopArt")
    popart_stats: str = attrs.field(default="moments", validator=attrs.validators.in_(("moments", "robust")))
    # the policy the bootstrap targets follow at the next state: "greedy" (double DQN: the online net's argmax) or
    # "expected_sarsa" (the expectation under softmax(Q/τ) per branch, τ the sarsa.temperature ISV slot); off by
    # default, worse on mean reversion (docs/learner.md, "Expected-SARSA targets")
    target_policy: str = attrs.field(default="greedy", validator=attrs.validators.in_(("greedy", "expected_sarsa")))
    # acting only: HOLD on the direction branch gets this many PopArt σ of expected Q added, so the agent trades only
    # when a direction beats holding by more; 0 (the default) is off (docs/learner.md, "Conviction floor": 0.25 stopped
    # every trade beside the execution credit)
    conviction_floor: float = attrs.field(default=0.0, validator=_non_negative_finite)
    # acting only: every other direction loses this many standard deviations of the ensemble heads' disagreement on
    # its advantage over HOLD, so the agent trades where the heads agree; 0 (the default) is off (docs/learner.md,
    # "Conviction spread")
    conviction_spread: float = attrs.field(default=0.0, validator=_non_negative_finite)
    # execution credit (foxhunt.learner.execution_credit, docs/learner.md "Execution credit"): the direction branch's
    # return gets back what a non-greedy execution lost, and the execution branches learn only from the orders
    # they shaped; off here, on in both profiles (foxhunt/profiles.py)
    execution_regret: bool = False
    shaping_only: bool = False
    # per-branch reward decomposition (foxhunt.learner.execution_credit, docs/learner.md "Reward split"): direction
    # and magnitude learn from the reward a PASSIVE market order for their position would have earned, order type
    # and urgency from what their execution gained or lost against it; off by default. It prices the direction at
    # that fixed execution, which execution_regret reprices at the greedy one: the two cannot both be on.
    reward_split: bool = attrs.field(default=False)
    # one value: every saved config names it, so the key stays readable; "batched" is refused by name
    grad_mode: str = attrs.field(default="loop", validator=_grad_mode)
    compile: bool = False  # torch.compile the update's op-heavy pieces (docs/learner.md, "Performance")
    # on CUDA, acting's expected Q through one fused Triton kernel (foxhunt.learner.fused_q; the CPU never uses it);
    # false: the torch expression, e.g. to compare the two or on a GPU Triton does not support
    fused_acting: bool = True
    batch_size: int = attrs.field(default=128, validator=_positive)
    replay: ReplayConfig = attrs.field(factory=ReplayConfig)

    def __attrs_post_init__(self) -> None:
        if self.n_step_mix and self.n_step_mix >= self.n_step:
            raise ValueError(
                f"learner.n_step_mix = {self.n_step_mix} must be shorter than learner.n_step = {self.n_step}: it is "
                f"the second, shorter return horizon (e.g. --set learner.n_step=16 --set learner.n_step_mix=3)"
            )
        if self.reward_split and self.execution_regret:
            raise ValueError(
                "learner.reward_split and learner.execution_regret both say what the direction branch's return is "
                "(priced at a PASSIVE market order, or at the greedy execution); switch one off, e.g. --set "
                "learner.execution_regret=false (both profiles switch it on)"
            )


def learner_config_of(config: Any) -> LearnerConfig:
    """The ``[learner]`` section of a run config (or ``config`` itself when it already is one).

    Loss plugins receive the whole run config in ``foxhunt_loss_components``;
    this lets them (and tests) accept either. A config without a ``learner``
    section (or ``None``) means the defaults.
    """
    if isinstance(config, LearnerConfig):
        return config
    learner = getattr(config, "learner", None)
    if learner is None:
        return LearnerConfig()
    if not isinstance(learner, LearnerConfig):
        raise TypeError(f"config.learner must be a LearnerConfig, got {type(learner).__name__}")
    return learner
