"""Float64 references of every adaptive kernel's formula, written with numpy over whole branches.

Each ``*_ref(isv, layout, params, signals)`` takes a float32 copy of the ISV
and returns the float32 ISV the kernel should leave (values are computed in
float64 and stored in float32, as the device buffer stores them).
"""

from __future__ import annotations

import math

import numpy as np

from foxhunt.actions import Branch
from foxhunt.fold_length import fold_length_of
from foxhunt_plugins.adaptive import epsilon, gamma, grad_balance, health, static, support, tau

__all__ = ["REFERENCES", "STEP", "optional_health"]

N = len(Branch)
STEP = "trainer.step"  # the kernel context's step counter, handed to the references with the signals


def _span(layout, name):
    return layout.span(name)


def optional_health(isv: np.ndarray, layout) -> float:
    if "health.value" not in layout.offsets:
        return 1.0
    return float(np.clip(np.float64(isv[_span(layout, "health.value")][0]), 0.0, 1.0))


def health_ref(isv, layout, prm, sig):
    P = health.HealthParam
    out = isv.copy()
    get = lambda name: out[_span(layout, name)].astype(np.float64)  # noqa: E731 - tiny accessor
    n = get(health.COUNT)[0]
    fast = max(prm[P.FAST_RATE], 1.0 / (n + 1.0))
    slow = max(prm[P.SLOW_RATE], 1.0 / (n + 1.0))
    q_gap = np.maximum(sig[health.Q_GAP].astype(np.float64), 0.0)
    q_mean = sig[health.Q_MEAN].astype(np.float64)
    gap_score = float(np.mean(q_gap / (q_gap + prm[P.GAP_SCALE])))
    reference = get(health.Q_MEAN_EMA) if n > 0 else q_mean.copy()
    drift = float(np.mean(np.abs(q_mean - reference) / (np.abs(reference) + prm[P.Q_SCALE])))
    out[_span(layout, health.Q_MEAN_EMA)] = reference + slow * (q_mean - reference)
    g = float(sig[health.GRAD_NORM].reshape(-1)[0])
    loss = float(sig[health.LOSS].reshape(-1)[0])
    gf = get(health.GRAD_FAST)[0] + fast * (g - get(health.GRAD_FAST)[0])
    gs = get(health.GRAD_SLOW)[0] + slow * (g - get(health.GRAD_SLOW)[0])
    lf = get(health.LOSS_FAST)[0] + fast * (loss - get(health.LOSS_FAST)[0])
    ls = get(health.LOSS_SLOW)[0] + slow * (loss - get(health.LOSS_SLOW)[0])
    score = lambda excess, tol: 1.0 / (1.0 + max(excess, 0.0) / tol)  # noqa: E731
    s_drift = score(drift, prm[P.DRIFT_TOL])
    s_grad = score(gf / (gs + 1e-12) - 1.0, prm[P.GRAD_TOL])
    s_loss = score((lf - ls) / (abs(ls) + 1e-12), prm[P.LOSS_TOL])
    share = float(sig[health.GREEDY_SHARE].astype(np.float64)[Branch.DIRECTION])
    s_collapse = score((share - prm[P.COLLAPSE_SHARE]) / (1.0 - prm[P.COLLAPSE_SHARE]), prm[P.COLLAPSE_TOL])
    raw = (gap_score ** prm[P.W_GAP]) * (s_drift ** prm[P.W_DRIFT]) * (s_grad ** prm[P.W_GRAD]) * (s_loss ** prm[P.W_LOSS])
    raw *= s_collapse ** prm[P.W_COLLAPSE]
    value = get(health.VALUE)[0]
    out[_span(layout, health.GRAD_FAST)] = gf
    out[_span(layout, health.GRAD_SLOW)] = gs
    out[_span(layout, health.LOSS_FAST)] = lf
    out[_span(layout, health.LOSS_SLOW)] = ls
    out[_span(layout, health.VALUE)] = value + prm[P.RATE] * (raw - value)
    out[_span(layout, health.RAW)] = raw
    out[_span(layout, health.COUNT)] = n + 1.0
    return out


def tau_ref(isv, layout, prm, sig):
    P = tau.TauParam
    out = isv.copy()
    p = float(np.clip(np.float64(out[_span(layout, "train.progress")][0]), 0.0, 1.0))
    h = optional_health(out, layout)
    scheduled = prm[P.END] + 0.5 * (prm[P.START] - prm[P.END]) * (1.0 + math.cos(math.pi * p))
    floor = prm[P.FLOOR_MIN] + (prm[P.FLOOR_MAX] - prm[P.FLOOR_MIN]) * (1.0 - h)
    out[_span(layout, tau.VALUE)] = min(max(scheduled, floor), 1.0)
    return out


def gamma_ref(isv, layout, prm, sig):
    P = gamma.GammaParam
    out = isv.copy()
    table = np.asarray(prm, dtype=np.float64)
    h = optional_health(out, layout)
    out[_span(layout, gamma.VALUE)] = table[:, P.MIN] + (table[:, P.MAX] - table[:, P.MIN]) * h
    return out


def epsilon_ref(isv, layout, prm, sig):
    P = epsilon.EpsilonParam
    out = isv.copy()
    table = np.asarray(prm, dtype=np.float64)
    start = np.float64(out[_span(layout, epsilon.FOLD_START)][0])
    done = (float(sig[STEP][0]) - start) * table[:, P.N_ENVS]
    p = np.clip(done / table[:, P.FOLD_ENV_STEPS], 0.0, 1.0)
    h = optional_health(out, layout)
    remaining = np.maximum(0.0, 1.0 - p / table[:, P.DECAY_FRACTION])
    scheduled = table[:, P.END] + (table[:, P.START] - table[:, P.END]) * remaining
    boosted = scheduled + table[:, P.HEALTH_BOOST] * (1.0 - h)
    out[_span(layout, epsilon.VALUE)] = np.clip(boosted, 0.0, table[:, P.CEILING])
    return out


def epsilon_fold_start_ref(isv, layout, prm, sig):
    out = isv.copy()
    out[_span(layout, epsilon.FOLD_START)] = float(sig[STEP][0])
    return out


def support_ref(isv, layout, prm, sig):
    P = support.SupportParam
    out = isv.copy()
    low = prm[P.MIN_HALF_WIDTH]
    center = out[_span(layout, support.CENTER)].astype(np.float64)
    half = np.maximum(out[_span(layout, support.HALF_WIDTH)].astype(np.float64), low)
    c_target = np.clip(sig[support.Q_MEAN].astype(np.float64), -prm[P.CENTER_BOUND], prm[P.CENTER_BOUND])
    h_target = np.clip(prm[P.STD_MULTIPLE] * np.maximum(sig[support.Q_STD].astype(np.float64), 0.0), low, prm[P.MAX_HALF_WIDTH])
    distance = (np.abs(c_target - center) + np.abs(h_target - half)) / half
    base = prm[P.BASE_RATE]
    rate = np.clip(base * (1.0 + distance), base, max(base, prm[P.MAX_RATE]))
    new_center = center + rate * (c_target - center)
    new_half = np.maximum(low, half + rate * (h_target - half))
    out[_span(layout, support.CENTER)] = new_center
    out[_span(layout, support.HALF_WIDTH)] = new_half
    mode = prm[P.KNOT_MODE]
    if mode == 0.0:  # an even spacing: the knots stay where they are
        return out
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    even = 2.0 * levels - 1.0
    offsets = out[_span(layout, support.KNOTS)].astype(np.float64).reshape(len(new_center), len(levels))
    if mode == 1.0:
        # each knot moves toward where its batch quantile falls inside the new support, as an offset from 2 p - 1
        quantiles = sig[support.RETURN_QUANTILES].astype(np.float64).reshape(len(new_center), len(levels))
        place = np.clip((quantiles - new_center[:, None]) / new_half[:, None], -1.0, 1.0)
        offsets = offsets + rate[:, None] * ((place - even) - offsets)
    else:
        # a clipped gradient step, then each place kept between the previous knot's (-1 for the first) and +1
        gradient = sig[support.KNOT_GRADIENT].astype(np.float64).reshape(len(new_center), len(levels))
        step = np.clip(prm[P.KNOT_LEARNING_RATE] * gradient, -prm[P.KNOT_MAX_STEP], prm[P.KNOT_MAX_STEP])
        places = even + offsets - step
        for k in range(len(levels)):
            floor = -1.0 if k == 0 else places[:, k - 1]
            places[:, k] = np.minimum(np.maximum(places[:, k], floor), 1.0)
        offsets = places - even
    out[_span(layout, support.KNOTS)] = offsets.ravel()
    return out


def grad_balance_ref(isv, layout, prm, sig):
    P = grad_balance.BalanceParam
    out = isv.copy()
    table = np.asarray(prm, dtype=np.float64)
    scale = out[_span(layout, grad_balance.SCALE)].astype(np.float64)
    unscaled = sig[grad_balance.BRANCH_GRAD_NORM].astype(np.float64) / np.maximum(scale, 1e-8)
    weight = table[:, P.TARGET] / np.maximum(unscaled, 1e-8)
    target = np.clip(weight / weight.mean(), 1.0 / table[:, P.LIMIT], table[:, P.LIMIT])
    out[_span(layout, grad_balance.SCALE)] = scale + table[:, P.RATE] * (target - scale)
    return out


def static_ref(isv, layout, prm, sig):
    out = isv.copy()
    out[_span(layout, static.CQL_ALPHA)] = prm[static.StaticParam.CQL_ALPHA]
    return out


# kernel name -> (reference, parameter builder from the owning plugin's settings and the run config)
REFERENCES = {
    "health.update": (health_ref, lambda settings, config: health.health_params(settings)),
    "tau.update": (tau_ref, lambda settings, config: tau.tau_params(settings)),
    "gamma.update": (gamma_ref, lambda settings, config: gamma.gamma_params(settings)),
    "epsilon.update": (epsilon_ref, lambda settings, config: epsilon.epsilon_params(settings, fold_length_of(config))),
    "epsilon.fold_start": (epsilon_fold_start_ref,
                           lambda settings, config: epsilon.epsilon_params(settings, fold_length_of(config))),
    "support.update": (support_ref, lambda settings, config: support.support_params(
        settings, "uniform" if config is None else config.learner.atom_spacing)),
    "grad_balance.update": (grad_balance_ref, lambda settings, config: grad_balance.grad_balance_params(settings)),
    "static.write": (static_ref, lambda settings, config: static.static_params(settings)),
}
