"""A selective state-space scan encoder (Mamba2-style): input-dependent Δ, B and C over the last W bars.

The encoder input ``[B, W × F + P]`` (:class:`foxhunt.Encoder`) is split into the window's feature rows
``[B, W, F]`` (oldest first) and the portfolio ``[B, P]``. One linear map of each row gives, per bar ``t``:
the input ``x_t`` (``width``, split into ``heads`` heads of ``width / heads``), a gate ``z_t``, the state's
input and output vectors ``B_t``, ``C_t`` (``state`` each, shared by the heads) and one step size per head
``Δ_t = softplus(· + dt_bias)``. Each head has a scalar decay rate ``A = −exp(a_log) < 0`` (Mamba2's scalar
A per head), and its state ``h [width / heads, state]`` follows the selective recurrence

    h_t = exp(Δ_t A) h_{t−1} + Δ_t x_t B_tᵀ,    y_t = h_t C_t + D x_t,

from ``h = 0`` before the window's first bar. The encoder reads ``y`` at the last bar, gated by
``silu(z)``, normalised and mapped out to ``width``; with the portfolio after it, it is the trunk's input
(``width + P`` wide).

How it is computed: only the last bar's ``y`` is read, and the recurrence unrolls to a weighted sum,
``h_W = Σ_t exp(A Σ_{s>t} Δ_s) Δ_t x_t B_tᵀ`` (every exponent ``≤ 0``, so nothing overflows): a reverse
cumulative sum of ``Δ`` and one contraction over the window, all bars at once, differentiated by autograd.
No custom backward: the tests check the parallel form and its gradient against the recurrence stepped bar by
bar in float64 (``tests/builtin_plugins/encoders/test_scan.py``).

Like the attention encoder, its normalisations have no learned vector named ``weight`` (the learner's spectral
normalisation bounds every such parameter as a matrix), it keeps no state between steps (the window is
recomputed from the feature matrix each step: ``h`` starts at 0 at the window's first bar), and its only
state is its parameters, the network's. Settings (``[plugins.scan]``): ``window`` (bars, 16), ``width``
(32), ``state`` (8), ``heads`` (2, dividing ``width``). Off by default: ``[learner] encoder = "scan"``
selects it; it has not been measured against ``mlp`` yet (docs/learner.md, "Encoders").
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import torch
from torch import nn
from torch.nn import functional as F

from foxhunt import Encoder, Registrar, hookimpl

__all__ = ["NAME", "ScanSettings", "SelectiveScanEncoder", "last_state", "foxhunt_declare", "foxhunt_encoders"]

NAME = "scan"
DT_MIN, DT_MAX = 1e-3, 1e-1  # the initial step sizes, spread log-uniformly over the heads (as Mamba does)


def _at_least(low: int) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{attribute.name} must be an int >= {low}, got {value!r}")
    return check


def _divides_width(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    _at_least(1)(instance, attribute, value)
    if instance.width % value:
        raise ValueError(f"heads ({value}) must divide width ({instance.width})")


@attrs.frozen
class ScanSettings:
    """``[plugins.scan]``: the window in bars and the encoder's size."""

    window: int = attrs.field(default=16, validator=_at_least(2))
    width: int = attrs.field(default=32, validator=_at_least(1))
    state: int = attrs.field(default=8, validator=_at_least(1))
    heads: int = attrs.field(default=2, validator=_divides_width)


def last_state(x: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The state after the window's last bar, from ``h = 0``, all bars at once.

    ``x [B, W, H, D]`` inputs, ``dt [B, W, H]`` step sizes (> 0), ``a [H]`` decay rates (< 0), ``b [B, W, N]``
    input vectors -> ``h_W [B, H, D, N] = Σ_t exp(a Σ_{s>t} dt_s) dt_t x_t b_tᵀ``.
    """
    later = dt.flip(1).cumsum(1).flip(1) - dt  # [B, W, H]: Σ of the step sizes after each bar
    weight = torch.exp(later * a) * dt  # [B, W, H], exponents <= 0
    return torch.einsum("bwh,bwhd,bwn->bhdn", weight, x, b)


class SelectiveScanEncoder(nn.Module):
    """``[B, window × n_features + portfolio]`` -> ``[B, width + portfolio]`` (the module docstring says how)."""

    def __init__(self, n_features: int, portfolio: int, settings: ScanSettings) -> None:
        super().__init__()
        self.window, self.n_features = settings.window, n_features
        self.width, self.state, self.heads = settings.width, settings.state, settings.heads
        self.in_proj = nn.Linear(n_features, 2 * settings.width + 2 * settings.state + settings.heads)
        heads = settings.heads
        dt = torch.exp(torch.linspace(math.log(DT_MIN), math.log(DT_MAX), heads))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt at the start
        self.a_log = nn.Parameter(torch.log(torch.arange(1, heads + 1, dtype=torch.float32)))  # A = -1, -2, ...
        self.skip = nn.Parameter(torch.ones(heads))  # D
        self.out = nn.Linear(settings.width, settings.width)
        self.out_features = settings.width + portfolio

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The window's rows -> ``(x [B, W, H, D], z [B, W, width], b, c [B, W, N], dt [B, W, H])``."""
        market = self.window * self.n_features
        rows = x[:, :market].reshape(x.shape[0], self.window, self.n_features)  # [B, W, F], oldest first
        u, z, b, c, dt = self.in_proj(rows).split([self.width, self.width, self.state, self.state, self.heads], -1)
        u = u.reshape(*u.shape[:2], self.heads, self.width // self.heads)
        return u, z, b, c, F.softplus(dt + self.dt_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, z, b, c, dt = self.project(x)
        h = last_state(u, dt, -torch.exp(self.a_log), b)  # [B, H, D, N]
        y = torch.einsum("bhdn,bn->bhd", h, c[:, -1]) + self.skip[:, None] * u[:, -1]  # [B, H, D]
        y = y.reshape(x.shape[0], self.width) * F.silu(z[:, -1])
        summary = self.out(F.layer_norm(y, (self.width,)))  # [B, width]
        return torch.cat([summary, x[:, self.window * self.n_features:]], dim=1)


def build(n_features: int, portfolio: int, settings: ScanSettings) -> SelectiveScanEncoder:
    return SelectiveScanEncoder(n_features, portfolio, settings)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(ScanSettings)


@hookimpl
def foxhunt_encoders(settings: ScanSettings) -> list[Encoder]:
    return [Encoder(name=NAME, window=settings.window, build=build, settings=settings,
                    description="a selective state-space scan (Mamba2-style: input-dependent step, B and C, a "
                                "decay per head) over the last W bars, read at the last bar, then the portfolio")]
