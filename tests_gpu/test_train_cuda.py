"""`foxhunt train` on CUDA: the training step is replayed from captured CUDA graphs.

Run on an NVIDIA machine (not collected by the CPU suite)::

    python3 -m pytest -q tests_gpu

A short run on a planted market, GPU profile scaled down. Checked: the steps
were replayed from graphs (replays counted), no host synchronisation happened
anywhere in the epoch's step loop (torch's sync-debug "error" mode), random
draws differ across replays, and the run's results match the eager CUDA path
for the same seed.
"""

from __future__ import annotations

import math

import pytest
import torch

from foxhunt.checkpoint_backtest import backtest_checkpoint
from foxhunt.config import load_config
from foxhunt.trainer.graphs import WARMUP_CALLS
from foxhunt.trainer.progress import RunProgress
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

N_ENVS, VECTOR_STEPS, UPDATES, WARMUP_STEPS = 1024, 24, 48, 6
SHORT = [
    'data.source="synthetic:planted?bars=3000&seed=2"',
    'run.device="cuda"',
    "run.seed=5",
    f"env.n_envs={N_ENVS}",
    "learner.batch_size=2048",
    "learner.replay.capacity=131072",
    "learner.compile=false",
    "train.epochs=1",
    f"train.env_steps_per_epoch={N_ENVS * VECTOR_STEPS}",
    f"train.updates_per_epoch={UPDATES}",
    f"train.warmup_env_steps={N_ENVS * WARMUP_STEPS}",
    "folds.n_folds=1",
    "folds.train_bars=1500",
    "folds.validation_bars=300",
]
# Graph and eager CUDA runs differ only where kernels use atomics (index_add, scatter): float sums in another
# order. Over 42 updates that moves losses by well under a percent; the greedy validation backtest must agree.
LOSS_RTOL = 0.02


def _trainer(tmp_path_factory, cuda_graph: bool) -> Trainer:
    if not torch.cuda.is_available():
        raise RuntimeError("tests_gpu needs an NVIDIA GPU; run it on the device machine")
    config = load_config(None, [*SHORT, f"run.cuda_graph={str(cuda_graph).lower()}"])
    return Trainer(config, RunDirectory(tmp_path_factory.mktemp("cuda_train")), show_progress=False)


@pytest.fixture(scope="module")
def graphed(tmp_path_factory):
    """Epoch 0 warms up (kernels bind their arguments, a one-off host copy), captures and replays; epoch 1
    runs entirely under torch's sync-debug "error" mode."""
    trainer = _trainer(tmp_path_factory, cuda_graph=True)
    trainer._build()
    trainer._start_fold(trainer.data.folds[0])
    first = trainer._collect_and_learn(0, RunProgress(False, 1, 2))
    torch.cuda.set_sync_debug_mode("error")
    try:
        second = trainer._collect_and_learn(1, RunProgress(False, 1, 2))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    return trainer, (first, second)


def test_the_epoch_replays_captured_graphs_without_a_host_sync(graphed) -> None:
    trainer, (first, second) = graphed
    graphs = trainer.graphs
    assert graphs.captures == {"collect": 1, "update": 1}
    # the fold's warm-up steps make no update; every later call is a replay, bar the eager warm-up calls
    warm_updates = UPDATES - UPDATES * WARMUP_STEPS // VECTOR_STEPS
    assert (first["updates"], second["updates"]) == (warm_updates, UPDATES)
    assert graphs.replays == {
        "collect": 2 * VECTOR_STEPS - WARMUP_CALLS,
        "update": warm_updates + UPDATES - WARMUP_CALLS,
    }
    assert int(trainer.learner.updates) == warm_updates + UPDATES
    assert torch.isfinite(trainer.isv.tensor[: trainer.layout.offset("isv.fingerprint")]).all()


def test_random_draws_differ_across_replays(graphed) -> None:
    trainer, _ = graphed
    epsilon = trainer.isv.view("epsilon.branch")
    saved = epsilon.clone()
    epsilon.fill_(1.0)  # every action is a random draw: equal actions would mean a frozen generator
    try:
        before = trainer.graphs.replays["collect"]
        trainer.train_step(0)
        first = trainer.env.actions.clone()
        trainer.train_step(0)
        torch.cuda.synchronize()
        assert trainer.graphs.replays["collect"] == before + 2
        assert not torch.equal(first, trainer.env.actions)
    finally:
        epsilon.copy_(saved)


def test_a_graphed_run_matches_the_eager_cuda_run(tmp_path_factory) -> None:
    summaries, losses = [], []
    for cuda_graph in (True, False):
        trainer = _trainer(tmp_path_factory, cuda_graph)
        summaries.append(trainer.run())
        losses.append({k: float(v) for k, v in trainer.learner.metrics().items() if k.startswith("loss.")})
        assert trainer.graphs.enabled is cuda_graph
    graphed, eager = summaries
    for name, value in losses[1].items():
        assert math.isclose(losses[0][name], value, rel_tol=LOSS_RTOL, abs_tol=1e-4), name
    for count in ("fills", "round_trips"):
        assert graphed["overall"]["agent"][count] == eager["overall"]["agent"][count]
    assert math.isclose(graphed["overall"]["agent"]["sharpe"], eager["overall"]["agent"]["sharpe"], abs_tol=0.05)


def test_compiled_collection_draws_the_same_actions_as_eager(tmp_path_factory) -> None:
    """learner.compile fuses collection's torch work; it must not change a single action or stored value."""
    stored = []
    for compiled in (False, True):
        config = load_config(None, [*SHORT, "run.cuda_graph=false", f"learner.compile={str(compiled).lower()}"])
        trainer = Trainer(config, RunDirectory(tmp_path_factory.mktemp("collect")), show_progress=False)
        trainer._build()
        trainer._start_fold(trainer.data.folds[0])
        for _ in range(8):
            trainer._collect()
        torch.cuda.synchronize()
        replay = trainer.learner.replay
        stored.append((replay.actions.clone(), replay.obs.clone(), replay.rewards.clone(), trainer.action_counts.clone()))
    for eager, compiled in zip(*stored, strict=True):
        assert torch.equal(eager, compiled)


def test_every_fold_captures_its_own_graphs(tmp_path_factory) -> None:
    """A fold boundary drops the graphs; the next fold captures and replays again (a whole two-fold run)."""
    config = load_config(None, [*SHORT, "folds.n_folds=2", "folds.train_bars=1000", "folds.validation_bars=200",
                                "folds.test_bars=200"])
    trainer = Trainer(config, RunDirectory(tmp_path_factory.mktemp("two_folds")), show_progress=False)
    summary = trainer.run()
    assert len(summary["folds"]) == 2
    assert trainer.graphs.captures == {"collect": 2, "update": 2}
    per_fold_collect = VECTOR_STEPS - WARMUP_CALLS
    assert trainer.graphs.replays["collect"] == 2 * per_fold_collect
    assert math.isfinite(summary["overall"]["agent"]["sharpe"])


def test_a_second_run_on_a_warm_kernel_cache_trains_on_cuda(tmp_path) -> None:
    """Two `foxhunt train --device cuda` processes on one fresh kernel cache both finish.

    The second run loads its CPU launchers from the cache instead of compiling them. Before every kernel
    indexed with plain ints (`device_constants`), that made numba.cuda type the adaptive kernels' IntEnum
    indices afresh and refuse them: the first run trained, every later one failed.
    """
    import os
    import shutil
    import subprocess

    env = {**os.environ, "FOXHUNT_CACHE_DIR": str(tmp_path / "cache")}
    command = [shutil.which("foxhunt") or "foxhunt", "train", "--device", "cuda", "--seed", "5"]
    for override in [*SHORT[3:], 'data.source="synthetic:planted?bars=3000&seed=2"']:
        command += ["--set", override]
    for run in ("cold", "warm"):
        done = subprocess.run([*command, "--out", str(tmp_path / run)], env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"the {run}-cache run failed:\n{done.stderr[-4000:]}"
        assert (tmp_path / run / "summary.json").is_file()


def test_auxiliary_tasks_train_inside_the_compiled_captured_step(tmp_path_factory) -> None:
    """With the auxiliary tasks on (their head, the replay's bar indices and future-return gather), the compiled
    step is still captured once and replayed without a host sync, and both tasks' losses are finite and learn."""
    if not torch.cuda.is_available():
        raise RuntimeError("tests_gpu needs an NVIDIA GPU; run it on the device machine")
    config = load_config(None, [*SHORT, "run.cuda_graph=true", "learner.compile=true",
                                "plugins.auxiliary.enabled=true", "learner.budgets.c51=0.3"])
    trainer = Trainer(config, RunDirectory(tmp_path_factory.mktemp("cuda_auxiliary")), show_progress=False)
    trainer._build()
    trainer._start_fold(trainer.data.folds[0])
    trainer._collect_and_learn(0, RunProgress(False, 1, 2))
    torch.cuda.set_sync_debug_mode("error")
    try:
        trainer._collect_and_learn(1, RunProgress(False, 1, 2))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert trainer.graphs.captures == {"collect": 1, "update": 1}
    metrics = trainer.learner.metrics()
    for name in ("aux_return", "aux_regime"):
        loss, norm = float(metrics[f"loss.{name}"]), float(metrics[f"grad_norm.{name}"])
        assert math.isfinite(loss) and loss > 0.0 and norm > 0.0, (name, loss, norm)
    # the gather read real targets: the replay's bars lie in the fold's training window
    fold = trainer.data.folds[0]
    bars = trainer.learner.replay.bars[: int(trainer.learner.replay.written.clamp(max=trainer.learner.replay.rows))]
    assert int(bars.min()) >= fold.train.start and int(bars.max()) < fold.train.stop


def test_an_averaged_fold_policy_on_cuda_is_what_the_summary_reports(tmp_path_factory) -> None:
    """``train.policy_epochs = 2`` on the graphed CUDA path: each epoch's network is kept (copied out of the
    captured step's static buffers), the fold's policy is the two epochs together, and a CUDA backtest of the saved
    checkpoint reproduces the summary's validation and test figures exactly."""
    config = load_config(None, [*SHORT, "run.cuda_graph=true", "train.epochs=2", "train.policy_epochs=2",
                                "folds.train_bars=1300", "folds.validation_bars=300", "folds.test_bars=300"])
    path = tmp_path_factory.mktemp("cuda_averaged") / "run"
    summary = Trainer(config, RunDirectory(path), show_progress=False).run()
    fold = summary["folds"][0]
    assert sorted(fold["policy_epochs"]) == [0, 1]
    checkpoint = path / "checkpoints" / "fold_0"
    for window in ("validation", "test"):
        outcome = backtest_checkpoint(checkpoint, device="cuda", window=window)
        assert list(outcome.window) == fold[f"{window}_window"]
        assert outcome.metrics["agent"] == fold[window]["agent"], window
    assert sorted(p.name for p in (path / "checkpoints").iterdir()) == ["fold_0"]
