"""benchmarks/input_ceiling.py: its unit-position P&L against a float64 loop, a rule fitted on the market model's
own expected return rediscovers its sign, and the script prints one row per input of the set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.benchmark_scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "input_ceiling.py"


def ceiling_module():
    return load_script("input_ceiling")


def test_unit_pnl_against_a_loop() -> None:
    ceiling = ceiling_module()
    rng = np.random.default_rng(0)
    targets = rng.choice([-1.0, 0.0, 1.0], size=40)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0, 0.01, 40)))
    cost = rng.uniform(0, 1e-3, 40)
    expected, held = [], 0.0
    for t in range(39):
        expected.append(targets[t] * (close[t + 1] / close[t] - 1.0) - cost[t] * abs(targets[t] - held))
        held = targets[t]
    np.testing.assert_allclose(ceiling.unit_pnl(targets, close, cost), expected, rtol=0, atol=1e-15)


def test_a_rule_fitted_on_the_models_expected_return_finds_its_sign() -> None:
    # the model's E[r_(t+1)] as the input: the OLS slope of the next return on it is about 1, and positive
    from foxhunt.data import load
    from foxhunt.data.synthetic import conditional_mean, spec_of

    ceiling = ceiling_module()
    market = load("synthetic:ar1?phi=0.3&bars=4000&seed=3")
    close = np.asarray(market.close, dtype=np.float64)
    slope, threshold, _ = ceiling.fitted_rule(conditional_mean(spec_of(market), close), close, np.full(len(close), 1e-5))
    assert 0.5 < slope < 1.5 and threshold >= 0.0


def test_the_script_prints_one_row_per_input() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--dataset", "meanrev", "--features", "minimal", "--seeds", "1"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and not line.startswith("| input")]
    assert [row.split("|")[1].strip() for row in rows] == ["ret_1", "ret_4", "ret_16", "rvol_16", "mom_8", "rsi_14"]
    assert all(np.isfinite(float(row.split("|")[2])) for row in rows)


def test_anchored_folds_fit_the_rules_on_longer_windows() -> None:
    # the suite's 5,000 bars leave about 2,700 bars before fold 0's validation window: anchored, the rules are
    # fitted on all of them, rolling on the last 2,000, so the ratios differ while the test windows stay the same
    from foxhunt.folds import FoldConfig

    ceiling = ceiling_module()
    rolling = ceiling.seed_ratios("meanrev", "minimal", 13, folds=FoldConfig(mode="rolling"))
    anchored = ceiling.seed_ratios("meanrev", "minimal", 13, folds=FoldConfig(mode="anchored"))
    assert list(anchored) == list(rolling)
    assert any(anchored[name] != rolling[name] for name in rolling)
    # without a layout, the defaults' own
    assert ceiling.seed_ratios("meanrev", "minimal", 13) == {"rolling": rolling, "anchored": anchored}[FoldConfig().mode]
