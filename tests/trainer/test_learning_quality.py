"""The agent learns: out of sample, after costs, it finds planted signals and leaves noise alone.

Measured on the synthetic bars whose highs and lows come from a Brownian bridge (docs/data.md), with the CPU
profile's execution credit (docs/learner.md, "Execution credit"), one torch thread (the fixture below), with the
environment step computing in float32 (docs/kernels.md, "Float32 arithmetic"):
- Planted EMA-momentum market, seeds 1-5, a 600-bar test window: agent/oracle 0.42, 0.60, 0.86, 0.87, 0.84
  (median 0.84), on the 2-core machine kind that set the bar.
- Driftless random walk, seeds 1-5, a 600-bar test window: turnover 0.03, 0.24, 0.22, 0.13, 0.17 of a policy that
  reverses its position every bar (median 0.17), on the same machine kind.
- AR(1) market of the learning suite (phi 0.2), seeds 1-20, a 3 000-bar test window, a discount of 0.8 on every
  branch, on an AMD EPYC 2-core machine (the CI's kind): agent/oracle 0.56, 0.10, 0.12, 0.68, 0.61, 0.54, 0.47,
  0.33, 0.45, 0.21, 0.51, 0.52, 0.30, 0.61, 0.44, 0.84, 0.32, 0.35, 0.12, 0.68 (median 0.46). With torch's
  non-vectorised kernels and MKL's compatible code path (`ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPAT`), which
  round the sums as another CPU model might: 0.51, 0.05, 0.12, 0.78, 0.61, 0.40, 0.41, 0.35, 0.36, 0.08, 0.64,
  0.52, 0.34, 0.74, 0.42, 0.77, 0.62, 0.55, 0.05, 0.53 (median 0.46).

The AR(1) check is built so that its median measures learning rather than luck (docs/learner.md, "The
learning-quality test's AR(1) check", has every variant). On one 600-bar window even the oracle's Sharpe ranged
from 3.9 to 18.7 over seeds 1-10 (standard deviation 5.0), so one seed's agent/oracle moved with the window as
much as with the learning: with that window and five seeds the median was 0.39 on one CPU model and 0.33 on the
AMD EPYC, and over seeds 1-10 it was 0.18. The 3 000-bar window (the same 1 150 training bars, a longer stretch
after them) halves that spread (the oracle: 7.8 to 16.3, standard deviation 2.6). With the profile's adaptive
discount (0.95-0.99 on the direction) seeds 1-20 then gave a median of 0.36, at the bar; the AR(1) signal lives
one bar, and a discount of 0.8 gave 0.46 (ahead on 13 of the 20 seeds, none losing money against one). Ten
seeds were not enough: under the other rounding seeds 1-10 have a median of 0.38 and seeds 11-20 0.54. Twenty
seeds held 0.46 under both roundings, so the check takes twenty, and its bar stays 0.35.

So on the planted market the median of the five seeds must reach half the oracle and at most one seed may fail
to make money; on the AR(1) market the median of the twenty seeds must reach 0.35 of the oracle (a few seeds reach
an eighth of it or less, so the median is its bar); on the random walk the median turnover must stay under
CHURN_FRACTION of the churner's. The thresholds sit below the measured medians so that they fail when learning
regresses. The CPU path is bit-reproducible, so a given commit always gives the same figures on one machine;
another CPU model rounds the sums differently, and a short run carries that far (docs/learner.md has earlier
measurements of the earlier 600-bar AR(1) check, with the float64 step and without the execution credit).

The config (`foxhunt.testing.learning_check.SHORT_RUN`) names its fold layout (rolling: 1 150 training bars), its
feature set (`ohlcv`, the twenty inputs), its learning rate (3e-4), batch (128) and ε decay (0.5), and turns the
replay's mirror off, because the figures above
were measured that way (the CPU profile's values, docs/tune.md "The defaults study", are for the default 3 folds x
4 epochs): the test guards the update path against regressions, at a config where one short run learns. This one
short epoch under-trains rather than over-fits: smaller input sets do worse, and with the mirror on some seeds do
not start trading (docs/learner.md, "The counterfactual mirror and the `horizons` set"). The default's own
learning, over the default 3 folds x 4 epochs, is `benchmarks/learning.py`'s.

The oracle (``foxhunt.data.oracle_positions``) holds ``sign(f)`` of the planted
EMA signal, one unit, paying the instrument's half spread and commission on
every change; its Sharpe is measured over exactly the bars the agent's
test equity covers, so both are judged on the same market stretch. The AR(1)
market's oracle is ``foxhunt.env.oracle.oracle_backtest``, run through the
environment's own fills and costs over the same window.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from foxhunt.data import load, oracle_sharpe
from foxhunt.testing.learning_check import CHECKS, Check, CheckRun, oracle_sharpe_over, run_check

# The runs themselves (config, oracles, the churner) are foxhunt.testing.learning_check's, which
# benchmarks/learning_check.py runs too; the bars they must clear are the test's.
MOST_LOSERS = 1  # planted market: seeds allowed to end without a profit (a loss or no trade)
FRACTION = 0.5  # planted market: median agent/oracle over its seeds
SIGNAL_FRACTION = 0.35  # AR(1): median agent/oracle over its twenty seeds (measured 0.46; the docstring)
CHURN_FRACTION = 0.25  # random walk: median turnover as a fraction of the every-bar churner's


def test_the_windowed_oracle_is_the_library_oracle_on_the_whole_market() -> None:
    market = load("synthetic:planted?bars=2000&seed=1")
    assert oracle_sharpe_over(market, [(0, len(market))]) == pytest.approx(oracle_sharpe(market), rel=1e-12)


@pytest.fixture(autouse=True)
def one_intra_op_thread() -> Iterator[None]:
    """One torch thread, as `foxhunt train` runs (run.threads): a matmul's sums are split by thread, so the
    figures above depend on it, and an earlier test in the same process may have left any count behind."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def runs_of(check: Check, tmp_path: Path) -> tuple[list[CheckRun], str]:
    """Every seed of ``check``, and one line per seed for the failure message."""
    runs = [run_check(check, seed, tmp_path) for seed in check.seeds]
    lines = [f"seed {run.seed}: agent {run.agent_sharpe:.2f}, "
             + (f"oracle {run.oracle_sharpe:.2f}, ratio {run.value:.2f}" if run.oracle_sharpe is not None else
                f"turnover {run.turnover:.0f} against the churner's {run.churner_turnover:.0f}") for run in runs]
    return runs, "; ".join(lines)


def assert_median_oracle_fraction(runs: Sequence[CheckRun], message: str, fraction: float,
                                  most_losers: int | None = MOST_LOSERS) -> None:
    """The median agent/oracle reaches ``fraction``, and (unless ``most_losers`` is None) at most ``most_losers``
    seeds end without a profit out of sample."""
    assert all(run.oracle_sharpe > 1.5 for run in runs), message  # the signal pays there: the bar means something
    ratios = [run.value for run in runs]
    if most_losers is not None:
        assert sum(ratio <= 0.0 for ratio in ratios) <= most_losers, "no profit out of sample: " + message
    assert float(np.median(ratios)) >= fraction, message


def test_agent_reaches_half_the_oracle_sharpe_out_of_sample(tmp_path: Path) -> None:
    assert_median_oracle_fraction(*runs_of(CHECKS["planted"], tmp_path), FRACTION)


def test_agent_finds_the_ar1_signal_out_of_sample(tmp_path: Path) -> None:
    # seeds 2, 3 and 19 reach an eighth of the oracle or less (the docstring): the median is the bar
    assert_median_oracle_fraction(*runs_of(CHECKS["ar1"], tmp_path), SIGNAL_FRACTION, most_losers=None)


def test_agent_leaves_a_random_walk_mostly_alone(tmp_path: Path) -> None:
    runs, message = runs_of(CHECKS["randomwalk"], tmp_path)
    assert float(np.median([run.value for run in runs])) <= CHURN_FRACTION, message
