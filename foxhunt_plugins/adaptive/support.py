"""Per-branch C51 atom support (centre and half-width) following the per-branch Q statistics.

Targets per branch ``b`` from the learner's batch statistics of expected Q:
``c*_b = clamp(q_mean_b, −center_bound, center_bound)`` and
``h*_b = clamp(std_multiple × q_std_b, min_half_width, max_half_width)``.

Adaptive-rate EMA: the further the target is from the current support,
measured in current half-widths, the faster the support follows:
``d = (|c*_b − c_b| + |h*_b − h_b|) / h_b``,
``r = clamp(r0 × (1 + d), r0, max_rate)`` with ``r0 = 1 / SUPPORT_DECAY_STEPS``;
``c_b ← c_b + r (c*_b − c_b)``, ``h_b ← max(min_half_width, h_b + r (h*_b − h_b))``.
A settled support moves at the base rate (stable targets for the C51
projection); one that is badly off catches up within a few updates.

Both slots are training-persist: the run starts from the bootstrap support
[−10, 10] (the learner's default) and converges toward the Q statistics at
least as fast as ``(1 − r0)^t``. They are not reset at fold boundaries because
the network, whose C51 logits are only meaningful over this support, carries
over folds too (like PopArt's statistics): a reset to [−10, 10] reinterpreted
every learned distribution over a range ~10x too wide until the EMA caught
up. On the planted market (3 folds, 1 epoch, seeds 2-5) persisting gave
overall out-of-sample Sharpe 1.18 / 3.22 / 3.77 / 2.66 against −0.62
/ 3.21 / 3.61 / 2.61 with the soft reset. The learner places its atoms at
``c_b + h_b × linspace(−1, 1, atoms)`` by default.

Atom knots (``support.knots``, ``[Branch × AtomKnot]``, moved and read only with ``[learner] atom_spacing =
"quantile"`` or ``"learned"``, the spacings the learner writes a knot signal for; otherwise they stay 0, an even
spacing). The slot holds offsets from the even places ``2 p_k − 1`` (0, the bootstrap, is an even spacing);
:mod:`foxhunt.learner.atoms` turns them into atom places.

- ``"quantile"``: at the same rate ``r``, each branch's knot ``k`` moves toward where the batch quantile of the
  n-step targets at level ``p_k`` (the ``learner.return_quantiles`` signal) falls inside the *new* support,
  ``x*_k = clamp((q_k − c_b) / h_b, −1, 1)``: ``o_k ← o_k + r ((x*_k − (2 p_k − 1)) − o_k)``. An average of
  sorted vectors stays sorted, so the knots never cross.
- ``"learned"``: one step of gradient descent on the C51 projection's error, whose gradient with respect to each
  offset is the ``learner.knot_gradient`` signal ``g``: ``o_k ← o_k − clamp(knot_learning_rate × g_k,
  −knot_max_step, knot_max_step)``. Then, from the first knot to the last, each place ``2 p_k − 1 + o_k`` is
  clamped between the previous knot's place (−1 for the first) and +1, so the knots stay sorted inside the
  support, as the atom map needs.
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
from foxhunt.contract import KNOT_EVEN_PLACES, AtomKnot
from foxhunt.kernels import DualKernel, device_constants, device_function
from foxhunt_plugins.adaptive.common import N_BRANCHES, BoundRun, clamp, param_tensor, signal_of, slot_offsets
from foxhunt_plugins.adaptive.validators import non_negative, positive, rate

__all__ = ["SupportSettings", "CENTER", "HALF_WIDTH", "CENTER_BOOTSTRAP", "HALF_WIDTH_BOOTSTRAP", "SUPPORT_DECAY_STEPS", "SIGNALS",
           "KNOT_MODES", "SupportSlot", "SupportParam", "SupportMonitor", "SUPPORT_KERNEL", "support_params",
           "foxhunt_declare", "foxhunt_kernels", "foxhunt_monitors"]

CENTER = contract.SUPPORT_CENTER
HALF_WIDTH = contract.SUPPORT_HALF_WIDTH
CENTER_BOOTSTRAP = 0.0
HALF_WIDTH_BOOTSTRAP = 10.0  # [−10, 10]: the learner's default v_min, v_max
SUPPORT_DECAY_STEPS = 100  # 1 / base EMA rate, in learner updates

KNOTS = contract.SUPPORT_KNOTS
Q_MEAN = contract.Q_MEAN
Q_STD = contract.Q_STD
RETURN_QUANTILES = contract.RETURN_QUANTILES
KNOT_GRADIENT = contract.KNOT_GRADIENT
SIGNALS = {Q_MEAN: (N_BRANCHES,), Q_STD: (N_BRANCHES,), RETURN_QUANTILES: (N_BRANCHES, AtomKnot.size()),
           KNOT_GRADIENT: (N_BRANCHES, AtomKnot.size())}
# SupportParam.KNOT_MODE: how the knots move, from the run's [learner] atom_spacing
KNOT_MODES = {"uniform": 0.0, "quantile": 1.0, "learned": 2.0}


class SupportSlot(DimTable):
    """Positions in the support kernel's slot-offset vector."""

    CENTER = auto()
    HALF_WIDTH = auto()
    KNOTS = auto()


class SupportParam(DimTable):
    """Positions in the support kernel's parameter vector."""

    STD_MULTIPLE = auto()
    MIN_HALF_WIDTH = auto()
    MAX_HALF_WIDTH = auto()
    CENTER_BOUND = auto()
    BASE_RATE = auto()
    MAX_RATE = auto()
    KNOT_MODE = auto()  # KNOT_MODES of the run's [learner] atom_spacing: 0 still, 1 quantiles, 2 gradient descent
    KNOT_LEARNING_RATE = auto()
    KNOT_MAX_STEP = auto()


# What the kernels index with: numba.cuda rejects IntEnum members as array indices (docs/kernels.md).
SUPPORT_PARAM = device_constants(SupportParam)
SUPPORT_SLOT = device_constants(SupportSlot)


@device_function
def _support_row(b, args):
    isv, off, prm, q_mean, q_std, quantiles, knot_gradient, even = args
    low = prm[SUPPORT_PARAM.MIN_HALF_WIDTH]
    bound = prm[SUPPORT_PARAM.CENTER_BOUND]
    c_slot = off[SUPPORT_SLOT.CENTER] + b
    h_slot = off[SUPPORT_SLOT.HALF_WIDTH] + b
    center = isv[c_slot]
    half = max(isv[h_slot], low)
    c_target = clamp(q_mean[b], -bound, bound)
    h_target = clamp(prm[SUPPORT_PARAM.STD_MULTIPLE] * max(q_std[b], 0.0), low, prm[SUPPORT_PARAM.MAX_HALF_WIDTH])
    distance = (abs(c_target - center) + abs(h_target - half)) / half
    base = prm[SUPPORT_PARAM.BASE_RATE]
    rate = clamp(base * (1.0 + distance), base, max(base, prm[SUPPORT_PARAM.MAX_RATE]))
    new_center = center + rate * (c_target - center)
    new_half = max(low, half + rate * (h_target - half))
    isv[c_slot] = new_center
    isv[h_slot] = new_half
    # the knots move only when the run places its atoms by them: otherwise the learner writes no knot signal, and
    # the slot stays 0 (an even spacing, which is what the run uses)
    mode = prm[SUPPORT_PARAM.KNOT_MODE]
    knots = quantiles.shape[1]
    if mode == 1.0:
        # the quantile knots follow at the support's rate, as offsets from their even places: an average of
        # sorted vectors stays sorted, so the knots never cross
        for k in range(knots):
            k_slot = off[SUPPORT_SLOT.KNOTS] + b * knots + k
            place = clamp((quantiles[b, k] - new_center) / new_half, -1.0, 1.0)
            offset = isv[k_slot]
            isv[k_slot] = offset + rate * ((place - even[k]) - offset)
    elif mode == 2.0:
        # the learned knots: a clipped gradient step, then each kept between the previous knot and +1 (sorted,
        # inside the support: what the atom map needs)
        limit = prm[SUPPORT_PARAM.KNOT_MAX_STEP]
        previous = -1.0
        for k in range(knots):
            k_slot = off[SUPPORT_SLOT.KNOTS] + b * knots + k
            step = clamp(prm[SUPPORT_PARAM.KNOT_LEARNING_RATE] * knot_gradient[b, k], -limit, limit)
            place = clamp(even[k] + isv[k_slot] - step, previous, 1.0)
            isv[k_slot] = place - even[k]
            previous = place


SUPPORT_KERNEL = DualKernel(_support_row, "support.update")


@attrs.frozen
class SupportSettings:
    """``[plugins.support]``: per-branch C51 atom support following the Q statistics.

    Target centre = mean Q, target half-width = ``std_multiple`` × Q std, both
    clamped to the bounds; the EMA rate grows with how far the target is from
    the current support (in half-widths), up to ``max_rate``.
    """

    std_multiple: float = attrs.field(default=4.0, validator=positive)
    min_half_width: float = attrs.field(default=1.0, validator=positive)
    max_half_width: float = attrs.field(default=100.0, validator=positive)
    center_bound: float = attrs.field(default=100.0, validator=non_negative)  # |centre| ≤ this
    max_rate: float = attrs.field(default=0.2, validator=rate)
    # [learner] atom_spacing = "learned": the knots' gradient-descent step on learner.knot_gradient, and the most
    # one update may move a knot (in support half-widths)
    knot_learning_rate: float = attrs.field(default=2.0, validator=non_negative)
    knot_max_step: float = attrs.field(default=0.01, validator=non_negative)

    def __attrs_post_init__(self) -> None:
        if self.min_half_width > self.max_half_width:
            raise ValueError(
                f"min_half_width ({self.min_half_width}) must not exceed "
                f"max_half_width ({self.max_half_width})"
            )


def support_params(settings: SupportSettings, atom_spacing: str = "uniform") -> list[float]:
    """The kernel's parameter vector for a run whose ``[learner] atom_spacing`` is ``atom_spacing``."""
    params = [0.0] * SupportParam.size()
    params[SupportParam.KNOT_MODE] = KNOT_MODES[atom_spacing]
    params[SupportParam.KNOT_LEARNING_RATE] = settings.knot_learning_rate
    params[SupportParam.KNOT_MAX_STEP] = settings.knot_max_step
    params[SupportParam.STD_MULTIPLE] = settings.std_multiple
    params[SupportParam.MIN_HALF_WIDTH] = settings.min_half_width
    params[SupportParam.MAX_HALF_WIDTH] = settings.max_half_width
    params[SupportParam.CENTER_BOUND] = settings.center_bound
    params[SupportParam.BASE_RATE] = 1.0 / SUPPORT_DECAY_STEPS
    params[SupportParam.MAX_RATE] = settings.max_rate
    return params


class SupportMonitor(AdaptiveMonitor):
    """Observes the per-branch atom supports."""

    name = "support"
    reads = (CENTER, HALF_WIDTH, KNOTS)
    labels = {CENTER: Branch.names(), HALF_WIDTH: Branch.names(),
              KNOTS: [f"{branch}.{knot}" for branch in Branch.names() for knot in AtomKnot.names()]}


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(SupportSettings)
    registrar.slot(CENTER, width=len(Branch), init=CENTER_BOOTSTRAP,
                   doc="centre of each branch's C51 atom support [Branch] (normalised return units)")
    registrar.state(CENTER, ResetCategory.TRAINING_PERSIST,
                    doc=f"starts at {CENTER_BOOTSTRAP}, follows the mean Q; kept across folds with the network")
    registrar.slot(HALF_WIDTH, width=len(Branch), init=HALF_WIDTH_BOOTSTRAP,
                   doc="half-width of each branch's atom support [Branch]: atoms span centre ± half-width")
    registrar.state(HALF_WIDTH, ResetCategory.TRAINING_PERSIST,
                    doc=f"starts at {HALF_WIDTH_BOOTSTRAP}, follows the Q spread; kept across folds with the network")
    registrar.slot(KNOTS, width=len(Branch) * AtomKnot.size(), init=0.0,
                   doc="offsets of the atom spacing's knots from their even places [Branch × AtomKnot]")
    registrar.state(KNOTS, ResetCategory.TRAINING_PERSIST,
                    doc="starts at 0 (an even spacing), follows the n-step targets' quantiles or descends the "
                        "projection error's gradient; kept across folds with the network, like the centre and "
                        "half-width")
    registrar.dims(AtomKnot)
    registrar.state(MONITOR_STATE_PREFIX + SupportMonitor.name, ResetCategory.FOLD_RESET, reset=reset_monitor,
                    doc="fire-rate statistics of the support monitor (per fold)")


@hookimpl
def foxhunt_kernels(config: Any, settings: SupportSettings) -> list[Kernel]:
    learner = getattr(config, "learner", None)  # the knot signals are written for their own spacing only
    params = support_params(settings, getattr(learner, "atom_spacing", "uniform"))

    def bind(context):
        tensors = (
            context.isv,
            slot_offsets(context, (CENTER, HALF_WIDTH, KNOTS)),
            param_tensor(params, context),
            *(signal_of(context, name, shape, SUPPORT_KERNEL.name) for name, shape in SIGNALS.items()),
            param_tensor(list(KNOT_EVEN_PLACES), context),
        )
        return [(SUPPORT_KERNEL, N_BRANCHES, tensors)]

    return [
        Kernel(
            name="support.update",
            point=KernelPoint.STEP,
            run=BoundRun(bind),
            description="per-branch atom support centre, half-width and atom knots from Q and target "
                        "statistics (adaptive-rate EMA; knots by quantiles or by a gradient step)",
            writes=(CENTER, HALF_WIDTH, KNOTS),
            reads=tuple(SIGNALS),
        )
    ]


@hookimpl
def foxhunt_monitors(config: Any) -> list[AdaptiveMonitor]:
    return [SupportMonitor()]
