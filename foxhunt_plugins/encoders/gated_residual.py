"""The gated residual network block (Lim et al. 2021, the Temporal Fusion Transformer, eqs. 2-5), shared by the
``grn`` and ``vsn`` encoders; not a plugin.

A gated residual network (GRN) maps an input ``a`` (``in`` wide) to ``out`` values, without the paper's
context vector:

    η₂ = ELU(W₂ a + b₂),    η₁ = W₁ η₂ + b₁,    GLU(γ) = σ(W₄ γ + b₄) ⊙ (W₅ γ + b₅),
    GRN(a) = Norm(skip(a) + GLU(η₁)),

with ``η₂``, ``η₁`` ``hidden`` wide, ``skip`` the identity when ``in == out`` and a linear map otherwise, and
``Norm`` a layer normalisation over the ``out`` values. The gate lets a block pass its input almost unchanged
(``σ → 0``) where the extra non-linearity does not help, which is why the paper uses it on small, noisy
tabular inputs.

Why these choices:

- the normalisation has no learned scale or shift (``F.layer_norm`` without weights, as in the attention and
  scan encoders): the learner's spectral normalisation bounds every parameter named ``*weight`` as a matrix,
  and a LayerNorm's vector is not one;
- no dropout (the paper's GRN has it before the GLU): nothing else in the network drops units, and a
  deterministic forward keeps the compiled, captured step replayable and a run reproducible from its seed;
- ``groups`` G runs G independent GRNs at once (the learner's ``BatchedLinear``: weights ``[G, out, in]``, one
  einsum per layer, the layout of the per-branch layers), so the variable selection network gives each variable its own GRN with no
  Python loop over variables; spectral normalisation bounds each group member's matrix on its own, as it does
  the per-branch layers.

It lives in its own module because built-in plugins never import each other (``.importlinter``,
``tests/test_architecture.py``): both encoder plugins import it, as the adaptive plugins import
``foxhunt_plugins.adaptive.common``.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import nn
from torch.nn import functional as F

from foxhunt.learner import BatchedLinear

__all__ = ["MIN_WIDTH", "GatedResidualNetwork", "at_least"]

MIN_WIDTH = 2  # a layer norm over a single value is 0 whatever the input: a block of width 1 outputs nothing


def at_least(low: int, why: str = "") -> Any:
    """An attrs validator: an int (not a bool) ``>= low``; the message names the setting, the value and ``why``."""
    because = f" ({why})" if why else ""

    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{attribute.name} must be an int >= {low}{because}, got {value!r}")
    return check


def _linear(groups: int | None, in_features: int, out_features: int) -> nn.Module:
    """One linear map (``groups is None``: ``nn.Linear``) or ``groups`` of them batched: the learner's
    ``BatchedLinear`` (weight ``[G, out, in]``, ``x [B, G, in]`` -> ``[B, G, out]``, one einsum)."""
    if groups is None:
        return nn.Linear(in_features, out_features)
    return BatchedLinear(groups, in_features, out_features, shared_input=False)


class GatedResidualNetwork(nn.Module):
    """One GRN ``[B, in] -> [B, out]`` or, with ``groups`` G, G independent ones ``[B, G, in] -> [B, G, out]``.

    ``GRN(a) = LayerNorm(skip(a) + σ(W₄ η₁ + b₄) ⊙ (W₅ η₁ + b₅))``, ``η₁ = W₁ ELU(W₂ a + b₂) + b₁`` (the module
    docstring); the layer norm has no learned scale or shift.
    """

    def __init__(self, in_features: int, hidden: int, out_features: int, groups: int | None = None) -> None:
        super().__init__()
        self.in_features, self.hidden, self.out_features, self.groups = in_features, hidden, out_features, groups
        self.input_layer = _linear(groups, in_features, hidden)  # W₂, b₂
        self.hidden_layer = _linear(groups, hidden, hidden)  # W₁, b₁
        self.gate = _linear(groups, hidden, out_features)  # W₄, b₄
        self.value = _linear(groups, hidden, out_features)  # W₅, b₅
        # the residual needs the output's width: the identity when the input already has it, else a learned map
        self.skip = _linear(groups, in_features, out_features) if in_features != out_features else None

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        eta1 = self.hidden_layer(F.elu(self.input_layer(a)))
        gated = torch.sigmoid(self.gate(eta1)) * self.value(eta1)
        residual = a if self.skip is None else self.skip(a)
        return F.layer_norm(residual + gated, (self.out_features,))
