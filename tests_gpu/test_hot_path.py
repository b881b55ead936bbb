"""Invariant 3 on a real GPU: the training step never synchronises with the host and can be graph-captured.

Run on an NVIDIA machine (these tests are not collected by the CPU suite)::

    python3 -m pytest -q tests_gpu

torch's sync debug mode turns any host-device synchronisation that torch
performs (``.item()``, ``.cpu()``, a Python branch on a device value, a
blocking copy) into an error; the step must run clean under it, with the default
network, with the scan encoder, whose window is gathered on the device, and with the
variable selection encoder (vsn: batched per-variable gated residual networks), and with the quantile
and learned atom spacings and the two opt-in heads (compiled they once broke the graph). A CUDA graph
then replays the whole step, with every random draw coming from device
counters, so replays must produce new actions and new replay contents, and a learned
encoder's parameters must move (it trains inside the replayed step).
"""

from __future__ import annotations

import pytest
import torch

from foxhunt.config import load_config
from foxhunt.trainer.progress import RunProgress
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

SMALL = [
    "data.source=synthetic:planted?bars=3000&seed=2",
    "run.device=cuda",
    "env.n_envs=1024",
    "learner.batch_size=4096",
    "learner.replay.capacity=262144",
    "train.epochs=1",
    "train.env_steps_per_epoch=40960",
    "train.updates_per_epoch=40",
    "train.warmup_env_steps=8192",
    "run.cuda_graph=false",
    "folds.n_folds=1",
    "folds.train_bars=1500",
    "folds.validation_bars=300",
]


# The default one-bar network, the selective scan encoder over a window of bars gathered on the device, and the
# one-bar variable selection network (docs/learner.md, "Encoders"; their plugins must be installed: `pip install -e .`);
# then learner variants on the default network: atoms placed by the support kernel's quantile or learned knots
# ("Atom spacing") and the two opt-in heads on the auxiliary layer, whose tasks need no future returns (horizon 0).
VARIANTS = {
    "mlp": [],
    "scan": ['learner.encoder="scan"', "plugins.scan.window=8"],
    "vsn": ['learner.encoder="vsn"'],
    "quantile-atoms": ['learner.atom_spacing="quantile"'],
    "learned-atoms": ['learner.atom_spacing="learned"'],
    "heads": ["plugins.quantiles.enabled=true", "plugins.horizon_values.enabled=true", "learner.budgets.c51=0.3"],
    # the replay reads each step's execution part from the env's state inside the captured collect
    "reward-split": ["learner.reward_split=true", "learner.execution_regret=false"],
}


@pytest.fixture(scope="module", params=[(compiled, variant) for variant in VARIANTS for compiled in (False, True)],
                ids=lambda p: f"{'compiled' if p[0] else 'eager'}-learner-{p[1]}")
def trainer(request, tmp_path_factory):
    if not torch.cuda.is_available():
        raise RuntimeError("tests_gpu needs an NVIDIA GPU; run it on the device machine")
    compiled, variant = request.param
    # one variant per process in real use: start each from an empty compile cache, so the variants before it
    # do not count toward dynamo's recompile limit for the shared pieces
    torch._dynamo.reset()
    config = load_config(None, SMALL + [f"learner.compile={str(compiled).lower()}", *VARIANTS[variant]])
    trainer = Trainer(config, RunDirectory(tmp_path_factory.mktemp("gpu_run")), show_progress=False)
    trainer._build()
    trainer._start_fold(trainer.data.folds[0])
    trainer._collect_and_learn(0, RunProgress(False, 1, 1))  # compiles kernels, fills replay, warms allocators
    torch.cuda.synchronize()
    return trainer


def test_training_step_never_synchronises(trainer):
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            trainer.train_step(1)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert torch.isfinite(trainer.isv.tensor[: trainer.layout.offset("isv.fingerprint")]).all()


def test_training_step_replays_as_a_cuda_graph(trainer):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up on the side stream, as CUDA graph capture requires
            trainer.train_step(1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(trainer.learner.generator)  # replay draws advance the learner's own generator
    with torch.cuda.graph(graph):
        trainer.train_step(1)
    updates_before = int(trainer.learner.updates)
    actions_before = trainer.env.actions.clone()
    encoder = list(trainer.learner.network.encoder.parameters())  # none for mlp
    encoder_before = [p.detach().clone() for p in encoder]
    graph.replay()
    first = trainer.env.actions.clone()
    graph.replay()
    torch.cuda.synchronize()
    assert int(trainer.learner.updates) == updates_before + 2
    assert not torch.equal(first, trainer.env.actions) or not torch.equal(actions_before, first)
    assert torch.isfinite(trainer.isv.tensor[: trainer.layout.offset("isv.fingerprint")]).all()
    # a learned encoder (scan, vsn) trains inside the replayed step: its parameters move and stay finite
    assert not encoder or any(not torch.equal(b, p) for b, p in zip(encoder_before, encoder, strict=True))
    assert all(torch.isfinite(p).all() for p in encoder)
