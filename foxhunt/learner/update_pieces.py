"""The pieces of one learner update, as named module-level functions that ``[learner] compile`` compiles whole.

:meth:`foxhunt.learner.Learner.update` calls them in this order, with two random draws (τ) and the Adam step
between them: :func:`sample_batch`, :func:`prepare_targets`, :func:`functional_gradients` (compiled updates
only; the eager update takes its loop of ``autograd.grad`` instead), :func:`record_step`,
:func:`after_optimizer_step`. Each takes the learner as its first argument rather than being one of its
methods: compiled, each piece has its own code object, and dynamo guards on the learner's tensors and settings
rather than on its identity, so a second learner of the same shape reuses the compiled code instead of
recompiling.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from foxhunt import contract
from foxhunt.learner.functional import GradientStep
from foxhunt.learner.optim import polyak_update
from foxhunt.learner.replay import Batch
from foxhunt.learner.targets import Targets

if TYPE_CHECKING:  # the learner imports this module to build its pieces
    from foxhunt.learner.learner import Learner

__all__ = ["UpdatePieces", "EAGER_PIECES", "REPRODUCIBLE_COMPILE", "compiled_pieces", "sample_batch",
           "prepare_targets", "functional_gradients", "record_step", "after_optimizer_step"]

# Inductor's options for every piece foxhunt compiles (the update's and collection's). By default inductor
# times candidate kernels on the device (a reduction's block sizes, a padded or unpadded matmul) and keeps the
# fastest; under another load on the GPU another candidate wins and adds in another order, and one seed trains
# to a different policy (docs/gpu.md, "Reproducible compiled runs"). ``deterministic`` makes it choose without
# timing; ``tests_gpu/test_compile_reproducible.py`` checks a run against one whose timings are inverted.
REPRODUCIBLE_COMPILE: dict[str, Any] = {"deterministic": True}


def sample_batch(learner: Learner, uniforms: torch.Tensor) -> Batch:
    """The replay batch at ``uniforms`` (drawn by the caller), n-step returns under the current per-branch γ."""
    return learner.replay.sample_at(uniforms, learner.reads.gamma)


@torch.no_grad()
def prepare_targets(learner: Learner, batch: Batch, support: torch.Tensor, taus: torch.Tensor) -> Targets:
    """The target side at IQN fractions ``taus``, the PopArt step on both networks, the targets in PopArt's units.

    PopArt moves its statistics toward this batch's expected targets and rescales the value output layers of
    both networks so their unnormalised outputs are unchanged; the targets are then normalised by the new
    statistics, the ones the online forward is trained under.
    """
    targets = learner.targets(batch, support, taus)
    layers = learner.network.scalar_output_layers() + learner.target.scalar_output_layers()
    branch_layers = learner.network.branch_value_layers() + learner.target.branch_value_layers()
    learner.popart.update(targets.expected, layers, branch_layers)
    return targets.normalised(learner.popart.mu, learner.popart.sigma)


def functional_gradients(learner: Learner, batch: Batch, support: torch.Tensor, taus: torch.Tensor,
                         targets: Targets) -> GradientStep:
    """Forward, losses, per-component gradients and budgets as one pure function of the live parameters."""
    return learner.functional(learner.param_dict, batch, support, taus, targets)


@torch.no_grad()
def record_step(learner: Learner, step: GradientStep, batch: Batch) -> None:
    """The gradient into ``p.grad``; losses, replay priorities and the adaptive kernels' signals into their live
    tensors (rewritten in place: kernels and CUDA graphs hold their addresses)."""
    learner.gradients.store(step.budgeted)
    if step.budgeted.parameter_grad is not None:  # fixed by the combiner's record, not by a tensor value
        learner.combiner_parameters.grad.copy_(step.budgeted.parameter_grad)
    learner.loss_values.copy_(step.losses)
    if step.per_sample is not None:
        learner.replay.update_priorities(batch.indices, step.per_sample)
    signals = learner.signals
    signals[contract.Q_MEAN].copy_(step.q_mean)
    signals[contract.Q_STD].copy_(step.q_std)
    signals[contract.Q_GAP].copy_(step.q_gap)
    if step.atom_signal is not None:  # fixed for the run: the quantile and learned atom spacings compute one
        signals[learner.atom_shape.signal_name].copy_(step.atom_signal)
    signals[contract.GREEDY_SHARE].copy_(step.greedy_share)
    signals[contract.GRAD_NORM].copy_(learner.gradients.combined_norm)
    signals[contract.LOSS].copy_(step.losses.sum())
    signals[contract.BRANCH_GRAD_NORM].copy_(step.branch_grad_norm)


@torch.no_grad()
def after_optimizer_step(learner: Learner) -> None:
    """Spectral projection, Polyak target update (τ from the ISV), and the α/β anneal, schedule and counter."""
    learner.spectral.project()
    polyak_update(learner.target.parameters(), learner.network.parameters(),
                  learner.reads.tau.to(learner.dtype).squeeze(0))
    learner.replay.advance()
    learner.schedule.advance()
    learner.updates.add_(1)


@dataclasses.dataclass(frozen=True)
class UpdatePieces:
    """The update's pieces, eager (the functions above) or each compiled (:func:`compiled_pieces`)."""

    sample_batch: Callable[..., Batch]
    prepare_targets: Callable[..., Targets]
    functional_gradients: Callable[..., GradientStep]
    record_step: Callable[..., None]
    after_optimizer_step: Callable[..., None]


_PIECE_FUNCTIONS: tuple[Callable[..., Any], ...] = (
    sample_batch, prepare_targets, functional_gradients, record_step, after_optimizer_step,
)
EAGER_PIECES = UpdatePieces(*_PIECE_FUNCTIONS)


@functools.cache
def compiled_pieces() -> UpdatePieces:
    """Every piece through ``torch.compile(fullgraph=True, dynamic=False)``, made once per process on first use.

    On first use: torch.compile imports dynamo, which would double every ``foxhunt`` command's start-up.
    ``fullgraph``: a graph break would silently fall back to slow eager pieces; shapes are fixed for the run.
    ``options``: kernels chosen without timing them (:data:`REPRODUCIBLE_COMPILE`) and the split-K pass for the
    weight-gradient GEMMs on CUDA (:mod:`foxhunt.learner.split_k`).
    """
    from foxhunt.learner import split_k  # imports inductor: on first use only, as torch.compile does

    options = {**REPRODUCIBLE_COMPILE, **split_k.COMPILE_OPTIONS}
    return UpdatePieces(*(torch.compile(piece, fullgraph=True, dynamic=False, options=options)
                          for piece in _PIECE_FUNCTIONS))
