"""What TF32 matmuls cost in accuracy: one update's losses, gradients and Q-values against fp32.

    python benchmarks/tf32.py        # on a CUDA GPU

Builds the trainer with the GPU profile, fills the replay with a few vector
steps, samples one batch and computes every loss component, its gradient and
the online Q-values twice from the same random draws: with fp32 matmuls and
with TF32. Prints the relative difference of each.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from foxhunt.config import load_config
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def one_update(learner, state: torch.Tensor, batch_size: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], torch.Tensor]:
    learner.generator.set_state(state)
    inputs = learner.loss_inputs(learner.sample(batch_size))
    losses, grads = {}, {}
    for component in learner.components:
        loss = component.loss(inputs)
        parts = torch.autograd.grad(loss, learner.params, retain_graph=True, allow_unused=True)
        grads[component.name] = torch.cat([(g if g is not None else torch.zeros_like(p)).flatten()
                                           for g, p in zip(parts, learner.params, strict=True)])
        losses[component.name] = loss.detach()
    return losses, grads, inputs.online.q.detach()


def main() -> None:
    config = load_config(None, ['run.device="cuda"', "run.cuda_graph=false", "learner.compile=false",
                                'data.source="synthetic:planted?bars=20000&seed=1"', "folds.n_folds=1"])
    with tempfile.TemporaryDirectory() as directory:
        trainer = Trainer(config, RunDirectory(Path(directory)), show_progress=False)
        trainer._build()
        trainer._start_fold(trainer.data.folds[0])
        for _ in range(8):
            trainer._collect()
        learner = trainer.learner
        state = learner.generator.get_state()
        results = {}
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            results[tf32] = one_update(learner, state, config.learner.batch_size)
    (loss32, grad32, q32), (loss_tf, grad_tf, q_tf) = results[False], results[True]
    print(f"batch {config.learner.batch_size}, one update, TF32 against fp32 matmuls")
    print()
    print("| component | loss fp32 | loss rel. diff | gradient rel. diff (L2) |")
    print("|---|---:|---:|---:|")
    for name in loss32:
        loss_diff = abs(float(loss_tf[name] - loss32[name])) / max(abs(float(loss32[name])), 1e-12)
        grad_diff = float((grad_tf[name] - grad32[name]).norm() / grad32[name].norm().clamp_min(1e-30))
        print(f"| {name} | {float(loss32[name]):.6g} | {loss_diff:.2e} | {grad_diff:.2e} |")
    finite = torch.isfinite(q32)
    q_diff = float(((q_tf - q32)[finite]).abs().max() / q32[finite].abs().max())
    same_argmax = float((q_tf.argmax(-1) == q32.argmax(-1)).float().mean())
    print()
    print(f"online Q: max |diff| / max |Q| = {q_diff:.2e}; greedy action unchanged for {same_argmax:.2%} of rows")


if __name__ == "__main__":
    main()
