"""``[adaptive]`` config: one frozen attrs class per adaptive mechanism, composed in :class:`AdaptiveConfig`.

Each built-in adaptive plugin (``foxhunt_plugins.adaptive.*``) reads its own
section, ``config.adaptive.<name>``; :func:`adaptive_config_of` gives the
defaults when a config has no ``adaptive`` section. The formulas these numbers
enter are in ``docs/adaptive.md``.

What is *not* here on purpose: the bootstrap values and EMA lengths of the
soft-reset slots. They are part of the state contract (declared with the slot,
recorded in ``registry/state.toml``), so changing them is a visible diff of the
registry rather than a silent config change.
"""

from __future__ import annotations

from typing import Any

import attrs

from foxhunt.actions import Branch

__all__ = [
    "AdaptiveConfig",
    "HealthConfig",
    "TauConfig",
    "GammaConfig",
    "EpsilonConfig",
    "KellyConfig",
    "SupportConfig",
    "GradBalanceConfig",
    "StaticConfig",
    "adaptive_config_of",
    "FoldLength",
    "fold_length_of",
]

_positive = attrs.validators.gt(0.0)
_non_negative = attrs.validators.ge(0.0)
_unit = [attrs.validators.ge(0.0), attrs.validators.le(1.0)]
_rate = [attrs.validators.gt(0.0), attrs.validators.le(1.0)]


def _per_branch(value: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in value)


def _branch_width(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if len(value) != len(Branch):
        names = ", ".join(Branch.names())
        raise ValueError(f"{attribute.name} needs one value per branch ({names}), got {len(value)}")


def _all_unit(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if any(not 0.0 <= v <= 1.0 for v in value):
        raise ValueError(f"{attribute.name} values must lie in [0, 1], got {value!r}")


def _all_positive(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if any(not v > 0.0 for v in value):
        raise ValueError(f"{attribute.name} values must be > 0, got {value!r}")


_branch_unit = [_branch_width, _all_unit]


@attrs.frozen
class HealthConfig:
    """``[adaptive.health]``: how the learning-health signal weighs its four symptoms.

    Health is a weighted geometric mean of four scores in [0, 1] (Q-gap, Q-drift,
    gradient-norm spike, loss trend); the weights are relative (normalised to
    sum to 1). Rates are EMA rates per learner update.
    """

    w_gap: float = attrs.field(default=1.0, validator=_non_negative)
    w_drift: float = attrs.field(default=1.0, validator=_non_negative)
    w_grad: float = attrs.field(default=1.0, validator=_non_negative)
    w_loss: float = attrs.field(default=1.0, validator=_non_negative)
    gap_scale: float = attrs.field(default=0.05, validator=_positive)  # Q-gap (normalised units) scoring 0.5
    q_scale: float = attrs.field(default=1.0, validator=_positive)  # keeps the drift ratio finite near Q = 0
    drift_tol: float = attrs.field(default=0.1, validator=_positive)  # relative drift scoring 0.5
    grad_tol: float = attrs.field(default=1.0, validator=_positive)  # fast/slow grad-norm excess scoring 0.5
    loss_tol: float = attrs.field(default=0.5, validator=_positive)  # relative loss rise scoring 0.5
    fast_rate: float = attrs.field(default=0.1, validator=_rate)
    slow_rate: float = attrs.field(default=0.01, validator=_rate)

    def __attrs_post_init__(self) -> None:
        if not self.w_gap + self.w_drift + self.w_grad + self.w_loss > 0.0:
            raise ValueError("adaptive.health: at least one of w_gap, w_drift, w_grad, w_loss must be > 0")
        if self.slow_rate > self.fast_rate:
            raise ValueError(
                f"adaptive.health: slow_rate ({self.slow_rate}) must not exceed fast_rate ({self.fast_rate})"
            )

    def normalised_weights(self) -> tuple[float, float, float, float]:
        """(gap, drift, grad, loss) weights summing to 1."""
        total = self.w_gap + self.w_drift + self.w_grad + self.w_loss
        return (self.w_gap / total, self.w_drift / total, self.w_grad / total, self.w_loss / total)


@attrs.frozen
class TauConfig:
    """``[adaptive.tau]``: cosine schedule of the Polyak rate from ``start`` to ``end`` over a fold.

    The floor rises linearly from ``floor_min`` (health 1) to ``floor_max`` (health 0).
    """

    start: float = attrs.field(default=0.01, validator=_rate)
    end: float = attrs.field(default=0.001, validator=_rate)
    floor_min: float = attrs.field(default=0.001, validator=_unit)
    floor_max: float = attrs.field(default=0.005, validator=_unit)

    def __attrs_post_init__(self) -> None:
        if self.end > self.start:
            raise ValueError(f"adaptive.tau: end ({self.end}) must not exceed start ({self.start})")
        if self.floor_min > self.floor_max:
            raise ValueError(f"adaptive.tau: floor_min ({self.floor_min}) must not exceed floor_max ({self.floor_max})")


@attrs.frozen
class GammaConfig:
    """``[adaptive.gamma]``: per-branch discount bounds; γ moves from ``minimum`` (health 0) to ``maximum`` (health 1).

    Direction and magnitude decide P&L over many bars (long horizon); order type
    and urgency mostly decide the next fill's cost (short horizon).
    """

    minimum: tuple[float, ...] = attrs.field(default=(0.95, 0.95, 0.90, 0.90), converter=_per_branch, validator=_branch_unit)
    maximum: tuple[float, ...] = attrs.field(default=(0.99, 0.99, 0.97, 0.97), converter=_per_branch, validator=_branch_unit)

    def __attrs_post_init__(self) -> None:
        if any(lo > hi for lo, hi in zip(self.minimum, self.maximum, strict=True)):
            raise ValueError(f"adaptive.gamma: minimum {self.minimum} must not exceed maximum {self.maximum} per branch")


@attrs.frozen
class EpsilonConfig:
    """``[adaptive.epsilon]``: per-branch exploration, linear decay over ``decay_fraction`` of the fold plus a health boost.

    The fold is measured in environment transitions (``train.epochs ×
    train.env_steps_per_epoch``), so the same config explores the same share
    of its data whatever ``env.n_envs`` and however the fold is cut into epochs.
    """

    start: tuple[float, ...] = attrs.field(default=(1.0, 1.0, 1.0, 1.0), converter=_per_branch, validator=_branch_unit)
    end: tuple[float, ...] = attrs.field(default=(0.02, 0.02, 0.05, 0.05), converter=_per_branch, validator=_branch_unit)
    decay_fraction: float = attrs.field(default=0.5, validator=_rate)
    health_boost: float = attrs.field(default=0.2, validator=_unit)  # added at health 0
    ceiling: float = attrs.field(default=1.0, validator=_unit)

    def __attrs_post_init__(self) -> None:
        if any(e > s for s, e in zip(self.start, self.end, strict=True)):
            raise ValueError(f"adaptive.epsilon: end {self.end} must not exceed start {self.start} per branch")


@attrs.frozen
class KellyConfig:
    """``[adaptive.kelly]``: Bayesian Kelly fraction over every environment's round trips.

    The cap is a fraction of the maximum position: ``safety × blend`` where
    ``blend`` moves from 1 to the Kelly fraction over ``warmup_trades`` trades
    and ``safety = safety_floor + (1 − safety_floor) × health``.
    """

    prior_wins: float = attrs.field(default=2.0, validator=_positive)
    prior_losses: float = attrs.field(default=2.0, validator=_positive)
    warmup_trades: float = attrs.field(default=50.0, validator=_non_negative)
    safety_floor: float = attrs.field(default=0.5, validator=_unit)
    min_cap: float = attrs.field(default=0.05, validator=_unit)  # keeps some trading, so the statistics can recover


@attrs.frozen
class SupportConfig:
    """``[adaptive.support]``: per-branch C51 atom support following the Q statistics.

    Target centre = mean Q, target half-width = ``std_multiple`` × Q std, both
    clamped to the bounds; the EMA rate grows with how far the target is from
    the current support (in half-widths), up to ``max_rate``.
    """

    std_multiple: float = attrs.field(default=4.0, validator=_positive)
    min_half_width: float = attrs.field(default=1.0, validator=_positive)
    max_half_width: float = attrs.field(default=100.0, validator=_positive)
    center_bound: float = attrs.field(default=100.0, validator=_non_negative)  # |centre| ≤ this
    max_rate: float = attrs.field(default=0.2, validator=_rate)

    def __attrs_post_init__(self) -> None:
        if self.min_half_width > self.max_half_width:
            raise ValueError(
                f"adaptive.support: min_half_width ({self.min_half_width}) must not exceed "
                f"max_half_width ({self.max_half_width})"
            )


@attrs.frozen
class GradBalanceConfig:
    """``[adaptive.grad_balance]``: relative per-branch gradient targets and the scale limit.

    Scales stay within ``[1 / limit, limit]``.
    """

    targets: tuple[float, ...] = attrs.field(default=(1.0, 1.0, 1.0, 1.0), converter=_per_branch, validator=[_branch_width, _all_positive])
    limit: float = attrs.field(default=4.0, validator=attrs.validators.ge(1.0))


@attrs.frozen
class StaticConfig:
    """``[adaptive.static]``: values written once into the ISV when the run is built."""

    cql_alpha: float = attrs.field(default=0.1, validator=_non_negative)


@attrs.frozen
class AdaptiveConfig:
    """``[adaptive]``: every adaptive mechanism's settings."""

    health: HealthConfig = attrs.field(factory=HealthConfig)
    tau: TauConfig = attrs.field(factory=TauConfig)
    gamma: GammaConfig = attrs.field(factory=GammaConfig)
    epsilon: EpsilonConfig = attrs.field(factory=EpsilonConfig)
    kelly: KellyConfig = attrs.field(factory=KellyConfig)
    support: SupportConfig = attrs.field(factory=SupportConfig)
    grad_balance: GradBalanceConfig = attrs.field(factory=GradBalanceConfig)
    static: StaticConfig = attrs.field(factory=StaticConfig)


def adaptive_config_of(config: Any) -> AdaptiveConfig:
    """The ``[adaptive]`` section of a run config (or ``config`` itself when it is one); defaults when absent."""
    if isinstance(config, AdaptiveConfig):
        return config
    section = getattr(config, "adaptive", None)
    if section is None:
        return AdaptiveConfig()
    if not isinstance(section, AdaptiveConfig):
        raise TypeError(f"config.adaptive must be an AdaptiveConfig, got {type(section).__name__}")
    return section


@attrs.frozen
class FoldLength:
    """How long a fold is, for schedules measured in environment transitions.

    ``n_envs`` transitions per vector step; ``env_steps`` transitions per fold
    (``epochs`` × the epoch's vector steps × ``n_envs``, as the trainer lays them out).
    """

    n_envs: int
    env_steps: int


def fold_length_of(config: Any) -> FoldLength:
    """The fold length of a run config; the ``[env]`` and ``[train]`` defaults where a section is absent."""
    from foxhunt.env.config import EnvConfig
    from foxhunt.trainer.config import TrainConfig

    env = getattr(config, "env", None)
    train = getattr(config, "train", None)
    n_envs = env.n_envs if isinstance(env, EnvConfig) else EnvConfig().n_envs
    train = train if isinstance(train, TrainConfig) else TrainConfig()
    return FoldLength(n_envs=n_envs, env_steps=train.epochs * train.plan(n_envs).env_steps)
