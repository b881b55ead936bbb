"""``[learner] compile = true``: the compiled update computes what the eager update computes."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

PIECES = 5  # sample, prepare, gradients, record, after_optimizer: one graph each (fullgraph)


def compiled_graphs() -> int:
    return counters["stats"]["unique_graphs"]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def test_compiled_updates_match_eager_updates_without_recompiling(make_learner) -> None:
    runs = []
    for compiled in (False, True):
        learner = make_learner(compile=compiled)
        learner.step(32)  # compiles each piece once
        assert compiled_graphs() == (PIECES if compiled else 0)
        with torch._dynamo.config.patch(error_on_recompile=True):
            for _ in range(2):  # fresh batches, new Batch/Targets objects: the first compilation serves them
                learner.step(32)
        runs.append(learner)
    eager, compiled = runs
    for a, b in zip(eager.params, compiled.params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    for name in ("grad_norm.combined", "loss.c51", "loss.iqn", "grad_norm.ensemble", "popart.mu"):
        torch.testing.assert_close(eager.metrics()[name], compiled.metrics()[name], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(eager.replay.priorities, compiled.replay.priorities, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(eager.signals["learner.q_gap"], compiled.signals["learner.q_gap"], rtol=1e-4, atol=1e-6)
    assert int(compiled.metrics()["grad.safety_clips"]) == 0


def test_a_second_learner_of_the_same_shape_reuses_the_compiled_update(make_learner) -> None:
    make_learner(compile=True).step(32)
    assert compiled_graphs() == PIECES
    second = make_learner(compile=True, seed=1)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(2):
            second.step(32)
    assert compiled_graphs() == PIECES


def test_compiled_updates_with_atoms_centred_on_the_iql_value_head_match_eager(make_learner) -> None:
    """The state-value head, the per-sample atoms and the head's PopArt rescale compile whole (fullgraph)."""
    from foxhunt_plugins.losses import iql

    runs = []
    for compiled in (False, True):
        learner = make_learner(compile=compiled, extra=[(iql, "iql")], settings={"iql": {"enabled": True}},
                               budgets={"c51": 0.3, "iql": 0.1})
        for _ in range(2):
            learner.step(32)
        assert compiled_graphs() == (PIECES if compiled else 0)
        runs.append(learner)
    eager, compiled = runs
    for a, b in zip(eager.params, compiled.params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    for name in ("loss.iql", "loss.c51", "grad_norm.iql", "popart.mu"):
        torch.testing.assert_close(eager.metrics()[name], compiled.metrics()[name], rtol=1e-4, atol=1e-6)


def test_every_compiled_piece_chooses_its_kernels_without_timing_them(monkeypatch) -> None:
    """Inductor's timed choices made one GPU seed train differently under another load (docs/gpu.md,
    "Reproducible compiled runs"); tests_gpu/test_compile_reproducible.py checks the effect on a GPU, this
    that neither the update's pieces nor collection's leave the option out."""
    from foxhunt.learner import update_pieces
    from foxhunt.trainer import collect_pieces

    options = []
    monkeypatch.setattr(torch, "compile", lambda piece, **kwargs: options.append(kwargs.get("options", {})) or piece)
    update_pieces.compiled_pieces.__wrapped__()
    collect_pieces.compiled_collect_pieces.__wrapped__()
    assert len(options) == PIECES + 2  # the update's five pieces, collection's act and store
    assert all(option.get("deterministic") is True for option in options)
