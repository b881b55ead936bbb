"""A gated residual network encoder over one bar: the Temporal Fusion Transformer's GRN (Lim et al. 2021,
eqs. 2-5, without a context vector), stacked.

The encoder (W = 1) maps the observation ``[B, F + P]`` (one bar's F market features, then the P portfolio
features) through ``layers`` gated residual networks, each ``GRN(a) = LayerNorm(skip(a) + GLU(η₁))`` with
``η₁ = W₁ ELU(W₂ a + b₂) + b₁`` and ``GLU(γ) = σ(W₄ γ + b₄) ⊙ (W₅ γ + b₅)``
(:class:`~foxhunt_plugins.encoders.gated_residual.GatedResidualNetwork`, which says why the block is built as it
is). Every block is ``width`` wide, hidden and output; a block's skip is the identity where its input is already
``width`` wide and a linear map otherwise (the first block's, from ``F + P``, unless that is ``width``). The
output, ``[B, width]``, is the trunk's input: the portfolio is among the first block's inputs, so it is not
appended again.

The encoder keeps no state between steps: its only state is its parameters, which are the network's (the
learner's ``learner.network`` entry and its target copy). Its normalisations have no learned vector named
``weight`` (spectral normalisation bounds every such parameter as a matrix).

Settings (``[plugins.grn]``): ``width`` (32, at least 2: a layer norm over one value is always 0) and
``layers`` (2, at least 1). Off by default: ``[learner] encoder = "grn"`` selects it (docs/learner.md,
"Encoders").
"""

from __future__ import annotations

import attrs
import torch
from torch import nn

from foxhunt import Encoder, Registrar, hookimpl
from foxhunt_plugins.encoders.gated_residual import MIN_WIDTH, GatedResidualNetwork, at_least

__all__ = ["NAME", "GatedResidualNetwork", "GrnEncoder", "GrnSettings", "foxhunt_declare", "foxhunt_encoders"]

NAME = "grn"


@attrs.frozen
class GrnSettings:
    """``[plugins.grn]``: the width of every block (hidden and output) and how many are stacked."""

    width: int = attrs.field(default=32, validator=at_least(MIN_WIDTH, "a layer norm over one value is always 0"))
    layers: int = attrs.field(default=2, validator=at_least(1))


class GrnEncoder(nn.Module):
    """``[B, n_features + portfolio]`` -> ``[B, width]``: ``layers`` gated residual networks in a row."""

    def __init__(self, n_features: int, portfolio: int, settings: GrnSettings) -> None:
        super().__init__()
        self.n_features, self.portfolio, self.width = n_features, portfolio, settings.width
        widths = (n_features + portfolio, *(settings.width,) * settings.layers)
        self.blocks = nn.ModuleList(GatedResidualNetwork(widths[k], settings.width, widths[k + 1])
                                    for k in range(settings.layers))
        self.out_features = settings.width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:  # a fixed number of blocks: unrolled once when compiled
            x = block(x)
        return x


def build(n_features: int, portfolio: int, settings: GrnSettings) -> GrnEncoder:
    return GrnEncoder(n_features, portfolio, settings)


@hookimpl
def foxhunt_declare(registrar: Registrar) -> None:
    registrar.settings(GrnSettings)


@hookimpl
def foxhunt_encoders(settings: GrnSettings) -> list[Encoder]:
    return [Encoder(name=NAME, window=1, build=build, settings=settings,
                    description="gated residual networks (the Temporal Fusion Transformer's GRN, no context) over "
                                "one bar's observation, features and portfolio together")]
