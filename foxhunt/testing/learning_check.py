"""The learning-quality checks: short runs that show whether the agent still learns.

The CPU suite's learning test (``tests/trainer/test_learning_quality.py``) and ``benchmarks/learning_check.py``
both run these, so the per-seed figures a change is judged on come from exactly the config the test guards. A
plugin author can run them too, with the plugin's settings as overrides, to see that the agent still finds a
signal with the plugin loaded.

Each run trains one fold for one epoch (1 150 rolling training bars, 100 validation bars, then the test window),
300 updates over 32 environments: about 20 s on a 2-core machine once the kernels are compiled. Three checks:

- ``planted``: the planted EMA-momentum market; the measure is the agent's test Sharpe over the oracle's
  (:func:`oracle_sharpe_over`, which holds ``sign`` of the planted signal and pays the instrument's costs).
- ``ar1``: the learning suite's AR(1) market (phi 0.2) with a 3 000-bar test window and a discount of 0.8 on
  every branch; the oracle is :func:`foxhunt.env.oracle.oracle_backtest`, run through the same physics.
- ``randomwalk``: a driftless random walk, where there is nothing to find; the measure is the agent's turnover
  over that of a policy that reverses a full position at every bar (:func:`churner`).

docs/learner.md, "The learning-quality test's AR(1) check", has the measurements that chose each setting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

__all__ = ["SHORT_RUN", "Check", "CHECKS", "CheckRun", "short_config", "oracle_sharpe_over", "churner", "run_check"]

# One fold, one epoch, the twenty `ohlcv` inputs, the mirror off: the setting where one short run learns (the test
# module's docstring says why each value).
SHORT_RUN: tuple[str, ...] = (
    'run.device="cpu"',
    "folds.n_folds=1", "folds.train_bars=1150", "folds.validation_bars=100", "folds.test_bars=600",
    'folds.mode="rolling"',
    "train.epochs=1", "train.env_steps_per_epoch=9600", "train.updates_per_epoch=300", "env.n_envs=32",
    "train.warmup_env_steps=1024", 'features.feature_set="ohlcv"', "plugins.mirror.enabled=false",
    "learner.lr=3e-4", "learner.batch_size=128", "plugins.epsilon.decay_fraction=0.5",
)


@attrs.frozen
class Check:
    """One check: its market (a synthetic source without its seed), the seeds it runs, and its own overrides."""

    name: str
    source: str
    seeds: tuple[int, ...]
    overrides: tuple[str, ...] = ()
    # "oracle": agent/oracle Sharpe against the environment's threshold oracle; "planted": against the planted
    # signal's (oracle_sharpe_over); "churn": turnover over the every-bar churner's
    measure: str = attrs.field(default="oracle", validator=attrs.validators.in_(("oracle", "planted", "churn")))


CHECKS: dict[str, Check] = {
    "planted": Check("planted", "synthetic:planted?bars=2000", (1, 2, 3, 4, 5), measure="planted"),
    "ar1": Check(
        "ar1", "synthetic:ar1?phi=0.2&bars=4400", tuple(range(1, 21)),
        ("folds.test_bars=3000", "plugins.gamma.minimum=[0.8,0.8,0.8,0.8]",
         "plugins.gamma.maximum=[0.8,0.8,0.8,0.8]"),
    ),
    "randomwalk": Check("randomwalk", "synthetic:randomwalk?bars=2000", (1, 2, 3, 4, 5), measure="churn"),
}


@attrs.frozen
class CheckRun:
    """One seed of one check: the agent's test figures and what they are measured against."""

    check: str
    seed: int
    agent_sharpe: float
    round_trips: int
    turnover: float
    oracle_sharpe: float | None  # None for the random walk, whose best policy stays flat
    churner_turnover: float | None  # the random walk's yardstick; None elsewhere
    window: tuple[int, int]
    seconds: float

    @property
    def value(self) -> float:
        """The check's measure: agent/oracle Sharpe, or (random walk) turnover over the churner's."""
        if self.oracle_sharpe is not None:
            return self.agent_sharpe / self.oracle_sharpe
        assert self.churner_turnover is not None
        return self.turnover / self.churner_turnover

    def as_learning_run(self) -> dict[str, Any]:
        """The run shaped as ``benchmarks/learning.py --json`` keeps one, so ``learning_compare.py`` pairs it;
        the random walk's flat oracle reads as a Sharpe of 0 there, which makes round trips its measure."""
        oracle = {"sharpe": 0.0 if self.oracle_sharpe is None else self.oracle_sharpe}
        return {
            "dataset": self.check, "seed": self.seed, "windows": [list(self.window)],
            "agent": {"sharpe": self.agent_sharpe, "round_trips": self.round_trips, "turnover": self.turnover},
            "oracle": oracle, "churner_turnover": self.churner_turnover, "value": self.value, "wall_s": self.seconds,
        }


def short_config(seed: int, source: str, overrides: Sequence[str] = ()):
    """The short run's :class:`~foxhunt.config.Config` on ``source`` drawn with ``seed``, then ``overrides``."""
    from foxhunt.config import load_config

    return load_config(None, [f'data.source="{source}&seed={seed}"', f"run.seed={seed}", *SHORT_RUN, *overrides])


def oracle_sharpe_over(market, windows: Sequence[tuple[int, int]]) -> float:
    """The planted market's oracle: annualised Sharpe after costs on the bars a test equity curve holds.

    A test backtest over ``[start, stop)`` starts with its cash at bar ``start`` and books the returns of bars
    ``start + 1 .. stop - 1``.
    """
    from foxhunt.data import oracle_positions

    positions = oracle_positions(market)
    close = market.close
    spec = market.instrument
    cost = (spec.spread_ticks * spec.tick_size / 2.0) / close[:-1] + spec.commission / (close[:-1] * spec.multiplier)
    pnl = positions[1:] * np.diff(np.log(close)) - cost * np.abs(np.diff(positions))  # pnl[t - 1]: bar t
    bars = np.concatenate([pnl[start : stop - 1] for start, stop in windows])
    return float(bars.mean() / bars.std() * math.sqrt(spec.bars_per_year))


def churner(trainer, window: tuple[int, int]):
    """A policy that reverses a full position at every bar (the most a policy can trade), backtested on
    ``window`` of ``trainer``'s market with its features and environment config."""
    import torch

    from foxhunt.actions import Branch, Direction, Magnitude, OrderType, Urgency
    from foxhunt.env.backtest import backtest

    bars = {"seen": 0}

    def policy(obs: torch.Tensor) -> torch.Tensor:
        action = torch.zeros((1, Branch.size()), dtype=torch.int64)
        action[0, Branch.DIRECTION] = Direction.LONG if bars["seen"] % 2 == 0 else Direction.SHORT
        action[0, Branch.MAGNITUDE] = Magnitude.FULL
        action[0, Branch.ORDER_TYPE] = OrderType.MARKET
        action[0, Branch.URGENCY] = Urgency.NORMAL
        bars["seen"] += 1
        return action

    market = trainer.data.market
    return backtest(policy, market.ohlcv, trainer.features, market.instrument, trainer.config.env, window=window)


def run_check(check: Check, seed: int, root: Path, overrides: Sequence[str] = ()) -> CheckRun:
    """Train ``check``'s short run for ``seed`` under ``root`` (its run directory is ``root/<check>_<seed>``),
    with ``overrides`` after the check's own, and measure its one fold's test window."""
    from foxhunt.env.oracle import oracle_backtest
    from foxhunt.trainer.run_dir import RunDirectory
    from foxhunt.trainer.trainer import Trainer

    started = time.perf_counter()
    config = short_config(seed, check.source, [*check.overrides, *overrides])
    trainer = Trainer(config, RunDirectory(Path(root) / f"{check.name}_{seed}"), show_progress=False)
    summary = trainer.run()
    (fold,) = trainer.data.folds
    window = (fold.test.start, fold.test.stop)
    if summary["folds"][0]["test_window"] != list(window):
        raise RuntimeError(f"the summary reports test window {summary['folds'][0]['test_window']}, "
                           f"the fold's is {list(window)}: the measure would read the wrong bars")
    agent = summary["overall"]["agent"]
    oracle = churn = None
    if check.measure == "churn":
        churn = churner(trainer, window).turnover
    elif check.measure == "planted":
        oracle = oracle_sharpe_over(trainer.data.market, [window])
    else:
        oracle = oracle_backtest(trainer.data.market, trainer.config.env, window).sharpe
    return CheckRun(check.name, seed, float(agent["sharpe"]), int(agent["round_trips"]), float(agent["turnover"]),
                    oracle, churn, window, time.perf_counter() - started)
