"""The trade_plans plugin: its slots and settings, the environment kernel it swaps in, and a tiny ``foxhunt train``
whose training, backtests and checkpoint backtest all step with plans."""

from __future__ import annotations

import unittest
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings
from trainer_testkit import TINY, TINY_DATA, invoke, read_summary, train_args

from foxhunt.actions import Branch, Direction, branch_sizes

from foxhunt.checkpoint_backtest import backtest_checkpoint
from foxhunt.config import FoxhuntConfig, load_config
from foxhunt.contract import PLAN_PARAMS, PLAN_THRESHOLD
from foxhunt.env.plans import run_plan_step
from foxhunt.env.run_kernel import env_step_kernel, replaced_kernels
from foxhunt.env.tables import PLAN, PLAN_PARAM
from foxhunt.errors import PluginError
from foxhunt.isv import ISV
from foxhunt.kernels.context import KernelContext
from foxhunt.plugin.host import PluginHost, PluginSelection
from foxhunt.plugin.records import Kernel, KernelPoint
from foxhunt.state import ResetCategory
from foxhunt.testing import conformance_machine
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer
from foxhunt_plugins import market_env, trade_plans


def host_with(table: dict | None = None) -> PluginHost:
    host = PluginHost(PluginSelection(settings={"trade_plans": table} if table is not None else {}))
    host.add_plugin(market_env, "market_env")
    host.add_plugin(trade_plans, trade_plans.NAME)
    host.declare()
    return host


def test_its_slots_are_declared_on_or_off_and_the_layout_does_not_change() -> None:
    off, registries = host_with().freeze(), host_with({"enabled": True, "threshold": 0.5}).freeze()
    assert off.layout.fingerprint_hex == registries.layout.fingerprint_hex
    params, threshold = registries.layout.slot(PLAN_PARAMS), registries.layout.slot(PLAN_THRESHOLD)
    assert (params.width, params.owner) == (PLAN_PARAM.size(), "trade_plans")
    assert (threshold.width, threshold.init) == (1, 0.5)
    for name in (PLAN_PARAMS, PLAN_THRESHOLD):
        assert registries.state.entry(name).category is ResetCategory.TRAINING_PERSIST
    assert registries.state.entry(market_env.PLAN_STATE).category is ResetCategory.FOLD_RESET


def test_off_the_run_steps_with_market_env_and_on_with_the_plan_step_that_replaces_it() -> None:
    config = FoxhuntConfig()
    off = host_with()
    off.freeze()
    assert env_step_kernel(off.kernels(config)).name == market_env.STEP_KERNEL
    on = host_with({"enabled": True})
    on.freeze()
    kernels = on.kernels(config)
    chosen = env_step_kernel(kernels)
    assert chosen.name == trade_plans.STEP_KERNEL and chosen.run is run_plan_step
    assert [kernel.name for kernel in replaced_kernels(chosen, kernels)] == [market_env.STEP_KERNEL]


def test_the_construct_kernel_writes_the_configured_parameters() -> None:
    host = host_with({"enabled": True, "stop": 0.03, "target": 0.05, "horizon": 12})
    registries = host.freeze()
    isv = ISV(registries.layout)
    (writer,) = [k for k in host.kernels(FoxhuntConfig()) if k.point is KernelPoint.CONSTRUCT]
    writer.run(KernelContext("cpu", "cpu", isv.tensor, registries.layout))
    expected = torch.tensor([0.03, 0.05, 12.0], dtype=torch.float32)
    torch.testing.assert_close(isv.view(PLAN_PARAMS)[torch.tensor([PLAN_PARAM.STOP, PLAN_PARAM.TARGET,
                                                                   PLAN_PARAM.HORIZON])], expected)


@pytest.mark.parametrize(("key", "value"), [("stop", 1.0), ("stop", -0.01), ("target", float("inf")),
                                            ("horizon", -1), ("horizon", 2.5), ("threshold", 1.5)])
def test_a_bad_setting_is_refused_naming_its_key(key: str, value: float) -> None:
    with pytest.raises(PluginError, match=key):
        host_with({"enabled": True, key: value}).freeze()


def test_only_an_environment_kernel_replaces_another() -> None:
    with pytest.raises(ValueError, match="only an ENV_STEP kernel replaces another"):
        Kernel(name="x.fold", point=KernelPoint.FOLD, run=print, description="d", replaces="market_env.step")


def test_it_passes_the_conformance_machine_with_plans_on() -> None:
    """Its slots and state entries through resets and checkpoints, with its kernels running."""
    config = load_config(None, ["plugins.trade_plans.enabled=true", "plugins.trade_plans.threshold=0.25"])
    quick = settings(max_examples=4, stateful_step_count=6, deadline=None, database=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])
    case = conformance_machine(trade_plans, trade_plans.NAME, config, test_settings=quick)
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(case).run(result)
    assert [text for _, text in result.failures + result.errors] == []


def test_a_tiny_run_with_plans_trains_backtests_and_reports_their_exits(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    # Distances inside one bar's usual range, so that plans close positions in so short a run.
    overrides = (*TINY, "train.epochs=1", "folds.n_folds=1", "plugins.trade_plans.enabled=true",
                 "plugins.trade_plans.stop=0.002", "plugins.trade_plans.target=0.002", "plugins.trade_plans.horizon=5")
    result = invoke(*train_args(out, overrides))
    assert result.exit_code == 0, result.output + result.stderr
    summary = read_summary(out)
    test_metrics = summary["folds"][0]["test"]["agent"]
    exits = [test_metrics[f"plan_{kind}"] for kind in ("stops", "targets", "expiries")]
    assert sum(exits) <= test_metrics["round_trips"] + 1  # each exit closed a position (the last may stay open)
    assert [summary["overall"]["agent"][f"plan_{kind}"] for kind in ("stops", "targets", "expiries")] == exits
    hold = summary["folds"][0]["test"]["buy_and_hold"]  # no plan opens for a baseline: bought once, kept
    assert (hold["plan_stops"], hold["plan_targets"], hold["plan_expiries"], hold["exposure"]) == (0, 0, 0, 1.0)
    # The checkpoint's backtest steps with the same plans: the same test figures.
    outcome = backtest_checkpoint(out / "checkpoints" / "fold_0")
    reported = outcome.metrics["agent"]
    assert [reported[f"plan_{kind}"] for kind in ("stops", "targets", "expiries")] == exits
    assert reported["sharpe"] == pytest.approx(test_metrics["sharpe"], rel=1e-9, abs=1e-12)
    assert outcome.metrics["buy_and_hold"]["exposure"] == 1.0


def test_the_trainer_steps_its_environment_with_the_plans_of_its_isv(tmp_path: Path) -> None:
    config = load_config(None, [*TINY, f'data.source="{TINY_DATA}"', 'run.device="cpu"', "env.n_envs=16",
                                "plugins.trade_plans.enabled=true", "plugins.trade_plans.stop=0.003",
                                "plugins.trade_plans.target=0.003", "plugins.trade_plans.horizon=3"])
    trainer = Trainer(config, RunDirectory(tmp_path / "run"), show_progress=False)
    trainer._build()
    trainer._start_fold(trainer.data.folds[0])
    assert trainer.env_kernel.name == trade_plans.STEP_KERNEL
    assert trainer.isv.view(PLAN_PARAMS).tolist() == pytest.approx([0.003, 0.003, 3.0])  # the construct kernel ran
    generator = torch.Generator().manual_seed(0)
    opened = 0.0
    for _ in range(40):  # random entries, held: their plans open and close
        actions = torch.stack([torch.randint(0, size, (16,), generator=generator) for size in branch_sizes()], dim=1)
        actions[torch.rand(16, generator=generator) < 0.7, Branch.DIRECTION] = Direction.HOLD
        trainer.env.step(actions)
        opened += float((trainer.env.plan[:, PLAN.SIDE] != 0).sum())
    closed = trainer.env.plan[:, PLAN.STOPS : PLAN.EXPIRIES + 1].sum()
    assert opened > 0 and float(closed) > 0
