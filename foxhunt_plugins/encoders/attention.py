"""A causal attention encoder: one or two layers of self-attention over the last W bars, read at the last one.

The encoder input ``[B, W × F + P]`` (:class:`foxhunt.Encoder`) is split into the window's feature rows
``[B, W, F]`` (oldest first) and the portfolio ``[B, P]``. Each row is embedded (a linear map to ``width``
plus a learned position vector per row), then each layer is pre-normalised causal multi-head self-attention
and a two-layer feed-forward block, each with a residual. The last position's vector (which has attended to
every row of the window, all of them bars ``<= t``) is the summary; with the portfolio after it, it is the
trunk's input (``width + P`` wide).

Why these choices:

- the normalisation has no learned scale or shift (``F.layer_norm`` without weights): the learner's spectral
  normalisation bounds every parameter named ``*weight`` as a matrix, and a LayerNorm's vector is not one;
- attention is written out (scores, causal mask, softmax) rather than ``scaled_dot_product_attention``, whose
  CPU kernels are chosen at run time: this way a CPU run is bit-reproducible from its seed and the
  float64 reference in the tests is the same arithmetic;
- the encoder keeps no hidden state between steps: the window is recomputed from the feature matrix at each
  step, so its only state is its parameters, which are the network's (the learner's ``learner.network``
  entry and its target copy).

Settings (``[plugins.attention]``): ``window`` (bars, default 16), ``width`` (the embedding, 32), ``heads``
(2, dividing ``width``) and ``layers`` (1 or 2). Off by default: ``[learner] encoder = "attention"``
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

__all__ = ["NAME", "AttentionSettings", "CausalAttentionEncoder", "foxhunt_declare", "foxhunt_encoders"]

NAME = "attention"
MAX_LAYERS = 2


def _at_least(low: int) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{attribute.name} must be an int >= {low}, got {value!r}")
    return check


def _layers(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LAYERS:
        raise ValueError(f"layers must be 1 or {MAX_LAYERS} (a small encoder), got {value!r}")


def _divides_width(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    _at_least(1)(instance, attribute, value)
    if instance.width % value:
        raise ValueError(f"heads ({value}) must divide width ({instance.width})")


@attrs.frozen
class AttentionSettings:
    """``[plugins.attention]``: the window in bars and the encoder's size."""

    window: int = attrs.field(default=16, validator=_at_least(2))
    width: int = attrs.field(default=32, validator=_at_least(1))
    heads: int = attrs.field(default=2, validator=_divides_width)
    layers: int = attrs.field(default=1, validator=_layers)


class _Block(nn.Module):
    """Pre-normalised causal multi-head self-attention, then a feed-forward block, each with a residual."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.out = nn.Linear(width, width)
        self.ff_in = nn.Linear(width, 2 * width)
        self.ff_out = nn.Linear(2 * width, width)

    def forward(self, h: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
        batch, rows, width = h.shape
        size = width // self.heads
        x = F.layer_norm(h, (width,))

        def split(t: torch.Tensor) -> torch.Tensor:  # [B, W, width] -> [B, heads, W, size]
            return t.view(batch, rows, self.heads, size).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)  # [B, heads, W, W]
        scores = scores.masked_fill(~causal, float("-inf"))  # row i reads rows <= i only
        mixed = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, rows, width)
        h = h + self.out(mixed)
        return h + self.ff_out(F.relu(self.ff_in(F.layer_norm(h, (width,)))))


class CausalAttentionEncoder(nn.Module):
    """``[B, window × n_features + portfolio]`` -> ``[B, width + portfolio]`` (the module docstring says how)."""

    def __init__(self, n_features: int, portfolio: int, settings: AttentionSettings) -> None:
        super().__init__()
        self.window, self.n_features, self.portfolio = settings.window, n_features, portfolio
        self.embed = nn.Linear(n_features, settings.width)
        self.position = nn.Parameter(torch.randn(settings.window, settings.width) * 0.02)
        self.blocks = nn.ModuleList(_Block(settings.width, settings.heads) for _ in range(settings.layers))
        self.register_buffer("causal", torch.ones(settings.window, settings.window, dtype=torch.bool).tril(),
                             persistent=False)
        self.out_features = settings.width + portfolio

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        market = self.window * self.n_features
        rows = x[:, :market].reshape(x.shape[0], self.window, self.n_features)  # [B, W, F], oldest first
        h = self.embed(rows) + self.position  # [B, W, width]
        for block in self.blocks:
            h = block(h, self.causal)
        summary = F.layer_norm(h[:, -1], (h.shape[-1],))  # [B, width]: the last bar, having read the window
        return torch.cat([summary, x[:, market:]], dim=1)


def build(n_features: int, portfolio: int, settings: AttentionSettings) -> CausalAttentionEncoder:
    return CausalAttentionEncoder(n_features, portfolio, settings)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(AttentionSettings)


@hookimpl
def foxhunt_encoders(settings: AttentionSettings) -> list[Encoder]:
    return [Encoder(name=NAME, window=settings.window, build=build, settings=settings,
                    description="causal self-attention over the last W bars' features, read at the last bar, "
                                "then the portfolio")]
