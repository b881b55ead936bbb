"""Learning health in [0, 1], computed on the device after every learner update.

Five symptoms of a Q-learner going wrong, each scored in [0, 1] (1 = healthy):

- Q-gap ``s_gap = mean_b gap_b / (gap_b + gap_scale)``: ``gap_b`` (max − mean
  Q over branch b's actions) collapsing to zero means the heads no longer tell
  actions apart;
- Q-drift ``s_drift = 1 / (1 + d / drift_tol)`` with
  ``d = mean_b |q_b − q̄_b| / (|q̄_b| + q_scale)`` against the slow EMA ``q̄_b``:
  values running away from their own recent level is the signature of
  bootstrapped divergence;
- gradient spike ``s_grad = 1 / (1 + max(0, ĝ_fast / ĝ_slow − 1) / grad_tol)``;
- loss trend ``s_loss = 1 / (1 + max(0, (l̂_fast − l̂_slow) / |l̂_slow|) / loss_tol)``;
- policy collapse ``s_collapse = 1 / (1 + max(0, (c − collapse_share) / (1 − collapse_share)) / collapse_tol)``
  with ``c`` the share of the batch whose greedy direction is the most common one (signal
  ``learner.greedy_share``): a policy that takes one direction everywhere (never trades, or always holds one
  side) has learnt nothing about the states. Health falling raises ε through its health boost, which brings
  back the transitions that could contradict it. Its weight is 0 by default (docs/adaptive.md says why).

``raw = Π s_k^{w_k}`` (weights normalised to sum 1: a weighted geometric mean,
so one failing symptom pulls health down however good the others are), and
``health.value ← health.value + (raw − health.value) / HEALTH_DECAY_STEPS``.
The symptom EMAs warm up with rate ``max(rate, 1 / (n + 1))`` (the first
observation sets them) and restart at every fold; ``health.value`` is
soft-reset to :data:`HEALTH_BOOTSTRAP`. See docs/adaptive.md.
"""

from __future__ import annotations

from typing import Any

import attrs

from foxhunt import (
    MONITOR_STATE_PREFIX,
    AdaptiveMonitor,
    Branch,
    DimTable,
    Kernel,
    KernelPoint,
    Registrar,
    ResetCategory,
    auto,
    contract,
    hookimpl,
    reset_monitor,
)
from foxhunt.kernels import DualKernel, device_constants, device_function
from foxhunt_plugins.adaptive.common import N_BRANCHES, BoundRun, param_tensor, signal_of, slot_offsets
from foxhunt_plugins.adaptive.validators import non_negative, positive, rate

__all__ = ["HealthSettings", 
    "VALUE",
    "RAW",
    "COUNT",
    "Q_MEAN_EMA",
    "GRAD_FAST",
    "GRAD_SLOW",
    "LOSS_FAST",
    "LOSS_SLOW",
    "HEALTH_BOOTSTRAP",
    "HEALTH_DECAY_STEPS",
    "SIGNALS",
    "HealthSlot",
    "HealthParam",
    "HealthMonitor",
    "HEALTH_KERNEL",
    "foxhunt_declare",
    "foxhunt_kernels",
    "foxhunt_monitors",
]

VALUE = contract.HEALTH
RAW = contract.HEALTH_RAW
COUNT = contract.HEALTH_COUNT
Q_MEAN_EMA = contract.HEALTH_Q_MEAN_EMA
GRAD_FAST = contract.HEALTH_GRAD_FAST
GRAD_SLOW = contract.HEALTH_GRAD_SLOW
LOSS_FAST = contract.HEALTH_LOSS_FAST
LOSS_SLOW = contract.HEALTH_LOSS_SLOW

HEALTH_BOOTSTRAP = 0.5  # "don't know yet": a new fold starts half-healthy
HEALTH_DECAY_STEPS = 100  # EMA length of health.value, in learner updates
EPS = 1e-12

Q_GAP = contract.Q_GAP
Q_MEAN = contract.Q_MEAN
GRAD_NORM = contract.GRAD_NORM
LOSS = contract.LOSS
GREEDY_SHARE = contract.GREEDY_SHARE
SIGNALS = {Q_GAP: (N_BRANCHES,), Q_MEAN: (N_BRANCHES,), GRAD_NORM: (1,), LOSS: (1,), GREEDY_SHARE: (N_BRANCHES,)}
DIRECTION = int(Branch.DIRECTION)  # the branch whose collapse the collapse symptom watches


class HealthSlot(DimTable):
    """Positions in the health kernel's slot-offset vector."""

    VALUE = auto()
    RAW = auto()
    COUNT = auto()
    Q_MEAN_EMA = auto()
    GRAD_FAST = auto()
    GRAD_SLOW = auto()
    LOSS_FAST = auto()
    LOSS_SLOW = auto()


SLOT_NAMES = (VALUE, RAW, COUNT, Q_MEAN_EMA, GRAD_FAST, GRAD_SLOW, LOSS_FAST, LOSS_SLOW)


class HealthParam(DimTable):
    """Positions in the health kernel's parameter vector."""

    W_GAP = auto()
    W_DRIFT = auto()
    W_GRAD = auto()
    W_LOSS = auto()
    W_COLLAPSE = auto()
    GAP_SCALE = auto()
    Q_SCALE = auto()
    DRIFT_TOL = auto()
    GRAD_TOL = auto()
    LOSS_TOL = auto()
    COLLAPSE_SHARE = auto()
    COLLAPSE_TOL = auto()
    FAST_RATE = auto()
    SLOW_RATE = auto()
    RATE = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
HEALTH_PARAM = device_constants(HealthParam)
HEALTH_SLOT = device_constants(HealthSlot)


@device_function
def _score(excess, tol):
    return 1.0 / (1.0 + max(excess, 0.0) / tol)


@device_function
def _health_row(i, args):
    isv, off, prm, q_gap, q_mean, grad_norm, loss, greedy_share = args
    n = isv[off[HEALTH_SLOT.COUNT]]
    fast = max(prm[HEALTH_PARAM.FAST_RATE], 1.0 / (n + 1.0))
    slow = max(prm[HEALTH_PARAM.SLOW_RATE], 1.0 / (n + 1.0))
    gap_score = 0.0
    drift = 0.0
    for b in range(N_BRANCHES):
        gap = max(q_gap[b], 0.0)
        gap_score += gap / (gap + prm[HEALTH_PARAM.GAP_SCALE])
        slot = off[HEALTH_SLOT.Q_MEAN_EMA] + b
        reference = isv[slot] if n > 0.0 else q_mean[b]  # drift against the level before this observation
        drift += abs(q_mean[b] - reference) / (abs(reference) + prm[HEALTH_PARAM.Q_SCALE])
        isv[slot] = reference + slow * (q_mean[b] - reference)
    gap_score /= N_BRANCHES
    drift /= N_BRANCHES
    g_fast = isv[off[HEALTH_SLOT.GRAD_FAST]]
    g_slow = isv[off[HEALTH_SLOT.GRAD_SLOW]]
    g_fast = g_fast + fast * (grad_norm[0] - g_fast)
    g_slow = g_slow + slow * (grad_norm[0] - g_slow)
    l_fast = isv[off[HEALTH_SLOT.LOSS_FAST]]
    l_slow = isv[off[HEALTH_SLOT.LOSS_SLOW]]
    l_fast = l_fast + fast * (loss[0] - l_fast)
    l_slow = l_slow + slow * (loss[0] - l_slow)
    isv[off[HEALTH_SLOT.GRAD_FAST]] = g_fast
    isv[off[HEALTH_SLOT.GRAD_SLOW]] = g_slow
    isv[off[HEALTH_SLOT.LOSS_FAST]] = l_fast
    isv[off[HEALTH_SLOT.LOSS_SLOW]] = l_slow
    s_drift = _score(drift, prm[HEALTH_PARAM.DRIFT_TOL])
    s_grad = _score(g_fast / (g_slow + EPS) - 1.0, prm[HEALTH_PARAM.GRAD_TOL])
    s_loss = _score((l_fast - l_slow) / (abs(l_slow) + EPS), prm[HEALTH_PARAM.LOSS_TOL])
    collapse_share = prm[HEALTH_PARAM.COLLAPSE_SHARE]
    s_collapse = _score((greedy_share[DIRECTION] - collapse_share) / (1.0 - collapse_share),
                        prm[HEALTH_PARAM.COLLAPSE_TOL])
    raw = (
        gap_score ** prm[HEALTH_PARAM.W_GAP]
        * s_drift ** prm[HEALTH_PARAM.W_DRIFT]
        * s_grad ** prm[HEALTH_PARAM.W_GRAD]
        * s_loss ** prm[HEALTH_PARAM.W_LOSS]
        * s_collapse ** prm[HEALTH_PARAM.W_COLLAPSE]
    )
    value = isv[off[HEALTH_SLOT.VALUE]]
    isv[off[HEALTH_SLOT.VALUE]] = value + prm[HEALTH_PARAM.RATE] * (raw - value)
    isv[off[HEALTH_SLOT.RAW]] = raw
    isv[off[HEALTH_SLOT.COUNT]] = n + 1.0


HEALTH_KERNEL = DualKernel(_health_row, "health.update")


@attrs.frozen
class HealthSettings:
    """``[plugins.health]``: how the learning-health signal weighs its five symptoms.

    Health is a weighted geometric mean of five scores in [0, 1] (Q-gap, Q-drift,
    gradient-norm spike, loss trend, policy collapse); the weights are relative
    (normalised to sum to 1). Rates are EMA rates per learner update.
    """

    w_gap: float = attrs.field(default=1.0, validator=non_negative)
    w_drift: float = attrs.field(default=1.0, validator=non_negative)
    w_grad: float = attrs.field(default=1.0, validator=non_negative)
    w_loss: float = attrs.field(default=1.0, validator=non_negative)
    w_collapse: float = attrs.field(default=0.0, validator=non_negative)
    gap_scale: float = attrs.field(default=0.05, validator=positive)  # Q-gap (normalised units) scoring 0.5
    q_scale: float = attrs.field(default=1.0, validator=positive)  # keeps the drift ratio finite near Q = 0
    drift_tol: float = attrs.field(default=0.1, validator=positive)  # relative drift scoring 0.5
    grad_tol: float = attrs.field(default=1.0, validator=positive)  # fast/slow grad-norm excess scoring 0.5
    loss_tol: float = attrs.field(default=0.5, validator=positive)  # relative loss rise scoring 0.5
    # greedy-direction share above which the policy counts as collapsing, and the excess (as a share of what is
    # left above it) scoring 0.5: at 0.9 and 0.25, a batch all on one direction scores 0.2
    collapse_share: float = attrs.field(default=0.9, validator=[non_negative, attrs.validators.lt(1.0)])
    collapse_tol: float = attrs.field(default=0.25, validator=positive)
    fast_rate: float = attrs.field(default=0.1, validator=rate)
    slow_rate: float = attrs.field(default=0.01, validator=rate)

    def __attrs_post_init__(self) -> None:
        if not self.w_gap + self.w_drift + self.w_grad + self.w_loss + self.w_collapse > 0.0:
            raise ValueError("at least one of w_gap, w_drift, w_grad, w_loss, w_collapse must be > 0")
        if self.slow_rate > self.fast_rate:
            raise ValueError(
                f"slow_rate ({self.slow_rate}) must not exceed fast_rate ({self.fast_rate})"
            )

    def normalised_weights(self) -> tuple[float, float, float, float, float]:
        """(gap, drift, grad, loss, collapse) weights summing to 1."""
        weights = (self.w_gap, self.w_drift, self.w_grad, self.w_loss, self.w_collapse)
        total = sum(weights)
        return tuple(w / total for w in weights)


def health_params(settings: HealthSettings) -> list[float]:
    """The parameter vector ``[HealthParam]`` for the plugin's settings."""
    params = [0.0] * HealthParam.size()
    (
        params[HealthParam.W_GAP],
        params[HealthParam.W_DRIFT],
        params[HealthParam.W_GRAD],
        params[HealthParam.W_LOSS],
        params[HealthParam.W_COLLAPSE],
    ) = settings.normalised_weights()
    params[HealthParam.GAP_SCALE] = settings.gap_scale
    params[HealthParam.Q_SCALE] = settings.q_scale
    params[HealthParam.DRIFT_TOL] = settings.drift_tol
    params[HealthParam.GRAD_TOL] = settings.grad_tol
    params[HealthParam.LOSS_TOL] = settings.loss_tol
    params[HealthParam.COLLAPSE_SHARE] = settings.collapse_share
    params[HealthParam.COLLAPSE_TOL] = settings.collapse_tol
    params[HealthParam.FAST_RATE] = settings.fast_rate
    params[HealthParam.SLOW_RATE] = settings.slow_rate
    params[HealthParam.RATE] = 1.0 / HEALTH_DECAY_STEPS
    return params


class HealthMonitor(AdaptiveMonitor):
    """Observes learning health, its instantaneous raw value and the symptom EMAs."""

    name = "health"
    reads = (VALUE, RAW, GRAD_FAST, GRAD_SLOW, LOSS_FAST, LOSS_SLOW)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(HealthSettings)
    registrar.slot(VALUE, init=HEALTH_BOOTSTRAP, doc="learning health in [0, 1] (1 = healthy), EMA of health.raw")
    registrar.state(
        VALUE, ResetCategory.SOFT_RESET, decay_steps=HEALTH_DECAY_STEPS,
        doc=f"bootstrap {HEALTH_BOOTSTRAP} at each fold, then an EMA of health.raw over {HEALTH_DECAY_STEPS} updates",
    )
    registrar.slot(RAW, init=HEALTH_BOOTSTRAP, doc="instantaneous health: weighted geometric mean of the five symptom scores")
    registrar.state(RAW, ResetCategory.FOLD_RESET, doc="recomputed at every update")
    registrar.slot(COUNT, doc="updates observed this fold (sets the warm-up rate of the symptom EMAs)")
    registrar.state(COUNT, ResetCategory.FOLD_RESET, doc="restarts the symptom EMAs' warm-up at every fold")
    registrar.slot(Q_MEAN_EMA, width=len(Branch), doc="slow EMA of the mean Q per branch [Branch] (Q-drift reference)")
    registrar.state(Q_MEAN_EMA, ResetCategory.FOLD_RESET, doc="a new fold's market sets a new Q level")
    for name, what in ((GRAD_FAST, "fast EMA of the combined gradient norm"), (GRAD_SLOW, "slow EMA of the combined gradient norm"),
                       (LOSS_FAST, "fast EMA of the total loss"), (LOSS_SLOW, "slow EMA of the total loss")):
        registrar.slot(name, doc=what)
        registrar.state(name, ResetCategory.FOLD_RESET, doc="symptom EMA; warms up again from the fold's first update")
    registrar.state(
        MONITOR_STATE_PREFIX + HealthMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
        doc="fire-rate statistics of the health monitor (per fold)",
    )


def _bind(settings: HealthSettings):
    params = health_params(settings)

    def bind(context):
        tensors = (
            context.isv,
            slot_offsets(context, SLOT_NAMES),
            param_tensor(params, context),
            *(signal_of(context, name, shape, HEALTH_KERNEL.name) for name, shape in SIGNALS.items()),
        )
        return [(HEALTH_KERNEL, 1, tensors)]

    return bind


@hookimpl
def foxhunt_kernels(config: Any, settings: HealthSettings) -> list[Kernel]:
    return [
        Kernel(
            name="health.update",
            point=KernelPoint.STEP,
            run=BoundRun(_bind(settings)),
            description="learning health from Q-gap, Q-drift, gradient-norm and loss-trend EMAs and the greedy "
                        "direction's share (docs/adaptive.md)",
            writes=SLOT_NAMES,
            # its EMAs carry state between updates: it reads those slots before it writes them
            reads=(*SIGNALS, VALUE, COUNT, Q_MEAN_EMA, GRAD_FAST, GRAD_SLOW, LOSS_FAST, LOSS_SLOW),
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [HealthMonitor()]
