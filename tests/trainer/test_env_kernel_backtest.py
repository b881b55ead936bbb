"""The validation and test backtests, and `foxhunt backtest` of a checkpoint, step through the run's env kernel.

A third-party environment plugin (installed through an entry point, ``market_env`` disabled) runs the core
physics and then charges a fixed fee on every bar with a fill and a small account fee on every bar. A real run
with it must report that physics: its baselines pay those fees, its agent's figures are those of the fee kernel
(and not of the core physics, whatever the agent learned: the account fee is charged with or without trades),
and `foxhunt backtest` of its checkpoint gives the figures its own summary reports.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from trainer_testkit import TINY, invoke, read_summary, train_args

from foxhunt.checkpoint_backtest import load_policy
from foxhunt.env.kernel import run_env_step
from foxhunt.trainer import evaluation
from foxhunt.trainer.run_data import normalised_features, prepare_data

_spec = importlib.util.spec_from_file_location(
    "foxhunt_test_fake_dists", Path(__file__).resolve().parents[1] / "fixtures" / "fake_dists.py"
)
fake_dists: ModuleType = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_dists)

FILL_FEE = 250.0
BAR_FEE = 1.0
FEE_PLUGIN = f'''
"""An environment whose physics differs from the core's: a fee of {FILL_FEE} per fill and {BAR_FEE} per bar."""
from foxhunt import Kernel, KernelPoint, hookimpl
from foxhunt.env.kernel import run_env_step
from foxhunt.env.tables import EP, PS, RNG, PortfolioObs
from foxhunt.state import ResetCategory

FILL_FEE = {FILL_FEE}
BAR_FEE = {BAR_FEE}


def reset_portfolio(env):
    env.reset()


@hookimpl
def foxhunt_declare(registrar):
    for table in (PS, EP, RNG, PortfolioObs):
        registrar.dims(table)
    registrar.state("feemarket.portfolio", ResetCategory.FOLD_RESET, reset=reset_portfolio, doc="portfolio rows")
    registrar.state("feemarket.rng", ResetCategory.TRAINING_PERSIST, doc="random streams")


def step_with_fee(context):
    run_env_step(context)
    state = context.signal("env.state")
    fee = (state[:, PS.FILL_QTY] != 0).to(state.dtype) * FILL_FEE + BAR_FEE
    state[:, PS.EQUITY] -= fee
    state[:, PS.COSTS_PAID] += fee


@hookimpl
def foxhunt_kernels(config):
    return [Kernel("feemarket.step", KernelPoint.ENV_STEP, step_with_fee, "core physics plus a fee per fill")]
'''
ONE_FOLD = (*TINY, "folds.n_folds=1")
CORE_RUN = (*ONE_FOLD, 'plugins.disable=["feemarket"]')  # the fee plugin is installed: the core run leaves it out
FEE_RUN = (*ONE_FOLD, 'plugins.disable=["market_env"]')


@pytest.fixture(scope="module")
def fee_plugin(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = fake_dists.write_distribution(tmp_path_factory.mktemp("site"), "foxhunt-feemarket", "1.0",
                                         {"feemarket": ("foxhunt_test_feemarket", FEE_PLUGIN)})
    with pytest.MonkeyPatch.context() as patch:
        fake_dists.make_visible(patch, root)
        yield root
    fake_dists.forget_modules(root)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, fee_plugin: Path) -> dict[str, Path]:
    """The same tiny one-fold run under the core physics and under the fee plugin's."""
    out = {}
    for name, overrides in (("core", CORE_RUN), ("fee", FEE_RUN)):
        out[name] = tmp_path_factory.mktemp(name) / "run"
        result = invoke(*train_args(out[name], overrides))
        assert result.exit_code == 0, result.output + result.stderr
    assert json.loads((out["fee"] / "plugins.json").read_text())["feemarket"]["version"] == "1.0"
    assert "market_env" not in json.loads((out["fee"] / "plugins.json").read_text())
    return out


def test_the_baselines_of_a_run_pay_its_plugin_physics_fee(runs: dict[str, Path]) -> None:
    core, fee = (read_summary(runs[name])["folds"][0] for name in ("core", "fee"))
    for window in ("validation", "test"):
        start, stop = fee[f"{window}_window"]
        account_fees = BAR_FEE * (stop - start - 1)  # one per step: a window of n bars is n - 1 steps
        # buy-and-hold fills once, on its first bar; flat never fills
        assert core[window]["buy_and_hold"]["fills"] == fee[window]["buy_and_hold"]["fills"] == 1
        assert fee[window]["buy_and_hold"]["net_pnl"] == pytest.approx(
            core[window]["buy_and_hold"]["net_pnl"] - FILL_FEE - account_fees, abs=1e-6)
        assert fee[window]["flat"]["fills"] == core[window]["flat"]["fills"] == 0
        assert core[window]["flat"]["net_pnl"] == 0.0
        assert fee[window]["flat"]["net_pnl"] == pytest.approx(-account_fees, abs=1e-9)


def test_the_agent_is_backtested_with_the_fee_kernel_not_the_core_physics(runs: dict[str, Path]) -> None:
    summary = read_summary(runs["fee"])
    fold = summary["folds"][0]
    policy = load_policy(runs["fee"] / "checkpoints" / "fold_0")
    try:
        data = prepare_data(policy.config)
        market = data.market
        features, _ = normalised_features(data.features, data.folds[0], policy.config.features.clip)
        window = tuple(fold["validation_window"])
        core_physics = evaluation.RunBacktests(market.ohlcv, market.instrument, policy.config.env, run_env_step)
        replayed = evaluation.metrics_of(core_physics.agent(policy.policy.act_values, features, window))
    finally:
        policy.host.close()
    reported = fold["validation"]["agent"]
    # the same policy on the same bars: only the physics differs, and at least the account fee tells them apart
    assert reported["net_pnl"] != replayed["net_pnl"]


@pytest.mark.parametrize("window", ["test", "validation"])
def test_foxhunt_backtest_of_the_checkpoint_gives_the_run_s_own_figures(runs: dict[str, Path], tmp_path: Path,
                                                                        window: str) -> None:
    out = tmp_path / "backtest"
    result = invoke("backtest", str(runs["fee"] / "checkpoints" / "fold_0"), "--window", window, "--out", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    backtested = json.loads((out / "backtest.json").read_text())["metrics"]
    reported = read_summary(runs["fee"])["folds"][0][window]
    assert backtested == reported
