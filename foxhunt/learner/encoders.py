"""Encoders: what turns the last W bars into the trunk's input, and the window they read.

An encoder (an :class:`~foxhunt.plugin.records.Encoder` from the ``foxhunt_encoders`` hook) names a window length
W and builds a module. Its input is the *encoder input* ``[B, W × F + P]``: the F market features of bars
``t - W + 1 .. t``, oldest first, then the P portfolio features of the observation at ``t``. For W = 1 that
is the observation itself (``[B, F + P]``), untouched.

Where the window comes from. The environment's observation stays one bar (features of bar ``t`` and the
portfolio); each environment's bar ``t`` is in its portfolio state (``PS.BAR``). :func:`window_input`
gathers the W - 1 earlier feature rows by index from the fold's device feature matrix (``VectorEnv.features``,
the very matrix the environment reads its observation row from) and puts them before the observation:
one ``torch`` gather, on the device, no host copy. The replay stores the bar index of each observation
(``[rows, E]`` int64, twice: ``obs`` and ``next_obs``) rather than W copies of the features, and rebuilds
the windows at sample time with the same gather (:class:`~foxhunt.learner.replay.Replay`); the replay is
reset at every fold boundary, so the matrix it gathers from is always the one its bars were seen under.

Causal padding: a window reaching before the first bar of the data repeats that bar (the index is clamped at
0). Only bars ``<= t`` are ever read, so a change to any bar after ``t`` cannot change the input at ``t``
(``tests/learner/test_encoders.py`` checks it as a property). Bars before an episode's start, or before the
fold's training window, are real history the agent would have had; they are read, in training and in every
backtest alike (the backtest environment reads the same matrix by the same index).

``mlp`` is the core's own encoder and the default: W = 1 and the identity, so the trunk is today's MLP over
one bar, bit for bit. It lives here, not in a plugin, for the reason ``budgeted_sum`` does: a run with every
plugin disabled still needs one. The others are plugins (the built-in ``attention`` and ``scan``), selected by
``[learner] encoder`` and checked when the run's plugins are frozen (:func:`select_encoder`).

ISV context (``[learner] isv_context``, :mod:`foxhunt.learner.context`): the network appends C lanes of the live
ISV to the encoder input, after the portfolio columns, so every encoder is built with ``portfolio_width = P + C``
and reads them as non-window columns. An encoder whose ``build`` takes a ``context_width`` keyword is told C
(:func:`build_encoder`): the ``vsn`` encoder makes those columns a variable of their own.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from foxhunt.learner.choice import select_choice, unknown_choice
from foxhunt.plugin.records import Encoder

__all__ = ["DEFAULT_ENCODER", "MLP_ENCODER", "IdentityEncoder", "build_encoder", "encoder_input_width",
           "select_encoder", "unknown_encoder", "window_input", "window_indices"]

DEFAULT_ENCODER = "mlp"


class IdentityEncoder(nn.Module):
    """The one-bar encoder: the observation is the trunk's input (no parameters, no state)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.out_features = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def _build_identity(n_features: int, portfolio_width: int, settings: Any) -> nn.Module:
    return IdentityEncoder(n_features + portfolio_width)


MLP_ENCODER = Encoder(
    name="mlp",  # DEFAULT_ENCODER, written out: the audit hook reads component names as literals
    window=1,
    build=_build_identity,
    description="one bar: the observation (features + portfolio) is the MLP trunk's input, as before encoders",
)


def build_encoder(encoder: Encoder, n_features: int, portfolio_width: int, context_width: int) -> nn.Module:
    """``encoder``'s module for ``n_features`` market columns per bar and ``portfolio_width + context_width``
    non-window columns (the portfolio, then the ISV context's lanes). ``context_width`` is passed by keyword to a
    ``build`` that takes it, and only when there is context: an encoder that does not know of the context reads
    its lanes as more portfolio columns."""
    if context_width and "context_width" in inspect.signature(encoder.build).parameters:
        return encoder.build(n_features, portfolio_width + context_width, encoder.settings, context_width=context_width)
    return encoder.build(n_features, portfolio_width + context_width, encoder.settings)


def encoder_input_width(window: int, n_features: int, portfolio_width: int) -> int:
    """Width of the encoder input: ``window × n_features + portfolio_width``."""
    return window * n_features + portfolio_width


def window_indices(bars: torch.Tensor, window: int) -> torch.Tensor:
    """``bars [B]`` (any numeric dtype) -> the bar index of each window row ``[B, window]`` int64, oldest first,
    clamped at 0 (a window reaching before the data repeats its first bar)."""
    offsets = torch.arange(1 - window, 1, device=bars.device, dtype=torch.int64)  # [W]: -(W-1) .. 0
    return torch.clamp(bars.to(torch.int64)[:, None] + offsets[None, :], min=0)


def window_input(obs: torch.Tensor, bars: torch.Tensor, features: torch.Tensor, window: int) -> torch.Tensor:
    """The encoder input ``[B, window × F + P]`` of observations ``obs [B, F + P]`` at bars ``bars [B]``.

    The W - 1 feature rows before each bar are gathered from ``features [bars, F]`` (the fold's device matrix)
    and put before the observation, whose own market part is the row of bar ``t``. ``window == 1`` returns
    ``obs`` itself.
    """
    if window == 1:  # fixed for the run: a static branch
        return obs
    n_features = features.shape[1]
    history = window_indices(bars, window)[:, :-1]  # [B, W-1]
    rows = features[history].to(obs.dtype)  # [B, W-1, F]
    return torch.cat([rows.reshape(obs.shape[0], (window - 1) * n_features), obs], dim=1)


def unknown_encoder(encoders: Sequence[Encoder], name: str) -> str | None:
    """Why ``name`` cannot be used (no loaded plugin provides it, the available ones listed), or None."""
    return unknown_choice(encoders, name, "an encoder", "learner.encoder")


def select_encoder(encoders: Sequence[Encoder], name: str) -> Encoder:
    """The encoder called ``name``; a :class:`ConfigError` listing the available ones when no plugin provides it."""
    return select_choice(encoders, name, "an encoder", "learner.encoder")
