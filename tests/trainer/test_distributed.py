"""Multi-device training (foxhunt/trainer/distributed.py): real 2-process gloo runs on the CPU, the code path a
multi-GPU host runs with NCCL.

The collectives are checked against float64 references computed here from every rank's own inputs; the tiny
training runs check that the run finishes and writes what a one-process run writes, that the ranks end with
identical parameters and ISV while their replay shards differ, that ``--devices 1`` is the one-process run bit
for bit, and that a run trained on 2 ranks resumes on 1.
"""

from __future__ import annotations

import json
import os
import types
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from trainer_testkit import TINY, TINY_DATA, StopAfter, invoke, read_summary, train_args, warm_cache  # noqa: F401 - a fixture

from foxhunt.cli.common import resolve_config
from foxhunt.config import RunConfig
from foxhunt.errors import FoxhuntError
from foxhunt.learner.budgets import GradientBudget
from foxhunt.trainer.distributed import (
    DEVICES_FILE,
    RankSync,
    _rank_error,
    rank_seed,
    record_fatal_errors,
    train_on_devices,
)
from foxhunt.trainer.run_dir import RunDirectory

WORLD = 2
CASES = 16
MAX_GRAD_NORM = 0.5
BUDGETS = (0.3, 0.7)
# One fold, one or two epochs, a few updates: each 2-rank run stays well under a minute on two loaded cores.
SMALL = (*TINY, "folds.n_folds=1", "train.epochs=1", "train.updates_per_epoch=6")


# -- the collectives, against float64 references -------------------------------------------------
def _collectives_rank(rank: int, init_method: str, out: Path) -> None:
    """Each rank: random small nets and losses of its own, the budgeted combination, the learner's all-reduce
    hook; random PopArt batch moments through PopArt's hook. Writes its inputs and results for the parent."""
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=WORLD)
    try:
        sync, records = RankSync(rank, WORLD), []
        for case in range(CASES):
            generator = torch.Generator().manual_seed(1000 * case + rank)
            net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).double()
            with torch.no_grad():
                for p in net.parameters():
                    p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64))
            budget = GradientBudget(list(net.parameters()), BUDGETS, MAX_GRAD_NORM)
            x = torch.randn(7, 3, generator=generator, dtype=torch.float64)
            scale = 10.0 ** (6.0 * torch.rand((), generator=generator, dtype=torch.float64).item() - 3.0)
            out_ = net(x)
            budget.apply([scale * (out_[:, 0] ** 2).mean(), (out_[:, 1] - 1.0).abs().mean()])
            combiner_grad = torch.randn(2, 1, generator=generator, dtype=torch.float64)
            with_combiner = case % 2 == 1  # also the path that reduces two tensors in one all-reduce
            learner = types.SimpleNamespace(
                gradients=budget, combiner=types.SimpleNamespace(parameters_per_component=int(with_combiner)),
                combiner_parameters=types.SimpleNamespace(grad=combiner_grad.clone()))
            local = budget.flat_grad.clone()
            sync.gradients(learner)
            targets = 3.0 * torch.randn(32, 3, generator=generator, dtype=torch.float64) + rank
            mean, square = targets.mean(0), (targets * targets).mean(0)
            moments = sync.moments(mean.clone(), square.clone())
            records.append({
                "local": local, "reduced": budget.flat_grad.clone(), "combiner_local": combiner_grad,
                "combiner_reduced": learner.combiner_parameters.grad, "with_combiner": with_combiner,
                "targets": targets, "moments": torch.stack(moments),
            })
        torch.save(records, out / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def collectives(tmp_path_factory: pytest.TempPathFactory) -> list[list[dict]]:
    out = tmp_path_factory.mktemp("collectives")
    mp.spawn(_collectives_rank, args=(f"file://{out / 'rendezvous'}", out), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{rank}.pt") for rank in range(WORLD)]


def test_all_reduced_gradient_is_the_float64_mean_of_the_ranks(collectives: list[list[dict]]) -> None:
    for case in range(CASES):
        ranks = [records[case] for records in collectives]
        reference = sum(rank["local"] for rank in ranks) / WORLD
        assert not torch.equal(ranks[0]["local"], ranks[1]["local"])  # the ranks' gradients differ
        for rank in ranks:
            torch.testing.assert_close(rank["reduced"], reference, rtol=1e-12, atol=1e-15)
        if ranks[0]["with_combiner"]:
            combiner = sum(rank["combiner_local"] for rank in ranks) / WORLD
            for rank in ranks:
                torch.testing.assert_close(rank["combiner_reduced"], combiner, rtol=1e-12, atol=1e-15)
        else:  # untouched when the combiner has no learned values
            for rank in ranks:
                assert torch.equal(rank["combiner_reduced"], rank["combiner_local"])


def test_budget_guarantee_holds_for_the_all_reduced_gradient(collectives: list[list[dict]]) -> None:
    clipped = 0
    for case in range(CASES):
        ranks = [records[case] for records in collectives]
        for rank in ranks:
            assert float(rank["local"].norm()) <= MAX_GRAD_NORM * (1 + 1e-12)
            assert float(rank["reduced"].norm()) <= MAX_GRAD_NORM * (1 + 1e-12)
        clipped += any(float(rank["local"].norm()) > 0.99 * BUDGETS[0] * MAX_GRAD_NORM for rank in ranks)
    assert clipped > 0  # the scales reach the limits: the guarantee is tested where it binds


def test_popart_moments_are_the_moments_of_every_rank_batch(collectives: list[list[dict]]) -> None:
    for case in range(CASES):
        ranks = [records[case] for records in collectives]
        union = torch.cat([rank["targets"] for rank in ranks])
        reference = torch.stack([union.mean(0), (union * union).mean(0)])
        for rank in ranks:
            torch.testing.assert_close(rank["moments"], reference, rtol=1e-12, atol=1e-12)


def test_rank_seeds() -> None:
    assert rank_seed(7, 0) == 7  # rank 0 keeps the run's streams
    seeds = {rank_seed(seed, rank) for seed in (0, 1, 2**64 - 1) for rank in range(4)}
    assert len(seeds) == 12 and all(0 <= s < 2**64 for s in seeds)


# -- whole runs ----------------------------------------------------------------------------
def test_devices_default_is_one_and_devices_one_is_the_single_process_run(tmp_path: Path, warm_cache: Path) -> None:
    assert RunConfig().devices == 1
    assert resolve_config(None, ()).run.devices == 1
    plain, one = tmp_path / "plain", tmp_path / "one"
    for out, extra in ((plain, ()), (one, ("--devices", "1"))):
        result = invoke(*train_args(out, SMALL), *extra)
        assert result.exit_code == 0, result.output + result.stderr
    assert read_summary(plain) == read_summary(one)
    assert not (one / DEVICES_FILE).exists()
    for name in ("fold_0",):
        for file in sorted((plain / "checkpoints" / name).iterdir()):
            if file.is_file():
                assert file.read_bytes() == (one / "checkpoints" / name / file.name).read_bytes(), file.name


# A plateau recovery forced at the second epoch: its perturbation draws from each rank's own generator.
FORCED_RECOVERY = ("train.epochs=2", "train.recovery.enabled=true", "train.recovery.patience=1",
                   "train.recovery.min_delta=1e9", "train.recovery.max_recoveries=1", "train.recovery.ring_size=2")


def test_two_ranks_train_with_one_network_and_own_shards(tmp_path: Path, warm_cache: Path) -> None:
    out = tmp_path / "run"
    result = invoke(*train_args(out, (*SMALL, *FORCED_RECOVERY)), "--devices", "2")
    assert result.exit_code == 0, result.output + result.stderr
    summary = read_summary(out)
    assert [fold["fold"] for fold in summary["folds"]] == [0] and summary["overall"]["agent"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["epoch"] for row in rows] == [0, 1]  # rank 0 alone wrote the metrics
    assert any(row.get("recovery", {}).get("fired") for row in rows)
    agreement = json.loads((out / DEVICES_FILE).read_text(encoding="utf-8"))
    assert agreement["devices"] == 2 and agreement["backend"] == "gloo"
    assert agreement["max_parameter_difference"] == 0.0
    assert agreement["max_isv_difference"] == 0.0
    first, second = agreement["replay_shard_sums"]
    assert first != second  # each rank collected its own transitions
    assert "devices = 2" in (out / "config.toml").read_text(encoding="utf-8")
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["fold_0"]


def test_a_run_trained_on_two_ranks_resumes_on_one(tmp_path: Path, warm_cache: Path) -> None:
    out = tmp_path / "run"
    config = resolve_config(None, (*SMALL, "train.epochs=2", f"data.source='{TINY_DATA}'", "run.device='cpu'",
                                   "run.devices=2"))
    summary = train_on_devices(config, RunDirectory(out), resume=False, show_progress=False,
                               stop=StopAfter(out, 1))
    assert summary is None  # stopped after its first epoch, with a resume checkpoint from rank 0
    assert (out / "checkpoints" / "resume").is_dir()
    result = invoke("train", "--resume", str(out), "--devices", "1", "--device", "cpu", "--no-progress")
    assert result.exit_code == 0, result.output + result.stderr
    assert read_summary(out)["overall"]
    lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [0, 1]
    assert "devices = 1" in (out / "config.toml").read_text(encoding="utf-8")


def test_a_rank_error_is_raised_in_the_parent_as_itself(tmp_path: Path, warm_cache: Path) -> None:
    """Every rank fails to load the data: the parent raises that rank's own exception, nothing hangs, and the
    run folder holds no result."""
    out = tmp_path / "run"
    missing = tmp_path / "missing.csv"
    config = resolve_config(None, (*SMALL, f"data.source='{missing}'", "run.device='cpu'", "run.devices=2"))
    with pytest.raises(FoxhuntError, match="missing.csv") as raised:
        train_on_devices(config, RunDirectory(out), resume=False, show_progress=False)
    assert "a training rank failed" not in str(raised.value)  # rebuilt from the rank, not quoted
    assert not (out / "summary.json").exists()


def _aborting_rank(rank: int, error_dir: Path) -> None:
    """Rank 1 dies as a native library's abort would kill it: no Python exception, only SIGABRT."""
    record_fatal_errors(error_dir, rank)
    if rank == 1:
        os.abort()


def test_a_rank_killed_by_a_fatal_signal_is_reported_with_its_traceback(tmp_path: Path) -> None:
    with pytest.raises(mp.ProcessExitedException) as exited:
        mp.spawn(_aborting_rank, args=(tmp_path,), nprocs=WORLD, join=True)
    message = str(_rank_error(tmp_path, exited.value))
    assert message.startswith("a training rank failed: process 1 terminated with signal SIGABRT")
    assert "rank1 died on a fatal signal" in message and "Fatal Python error: Aborted" in message
    assert "_aborting_rank" in message  # the Python frame that was running when the signal came
    assert "rank0" not in message  # the rank that did not crash left an empty file, quoted nowhere
