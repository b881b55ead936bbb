"""Input ceiling: how much of a synthetic market's oracle a threshold rule on one input column reaches.

    python benchmarks/input_ceiling.py                                   # meanrev, horizons256, seeds 13-17
    python benchmarks/input_ceiling.py --dataset trend --features horizons --first-seed 18 --seeds 5
    python benchmarks/input_ceiling.py --fit-on calibration              # rules fitted on a 200,000-bar path
    python benchmarks/input_ceiling.py --fold-mode rolling               # each fold fits on the 2,000 bars before validation

It separates "can the inputs express the signal?" from "does the agent learn it?". For each seed (the market
drawn with that seed, as `benchmarks/learning.py` draws it) and each fold of the default walk-forward layout
(`foxhunt.folds.make_folds` with the run's `FoldConfig` defaults, anchored unless `--fold-mode rolling`, and the
feature set's warm-up), per input:

1. On the fold's training bars, the OLS slope of the next bar's log return on the input: the rule's estimate
   of the next return is ``m̂ = slope × input`` (so the sign is learnt, not given).
2. On the same bars, the threshold (a multiple of the one-way cost, `foxhunt.env.oracle.THRESHOLDS`) and band
   (hold or go flat inside it) with the best unit-position Sharpe after costs.
3. That rule traded on the fold's test bars.

With ``--fit-on calibration`` the slope and threshold come instead from one long path of the same model
(`foxhunt.env.oracle.CALIBRATION_BARS` bars from its calibration seed, as the oracle's own threshold does): what
the input allows when the window's length is not the limit.

The oracle is the market model's own expected return with its calibrated threshold
(`foxhunt.env.oracle.oracle_policy`), traded on the same test bars. Both are unit positions paying the one-way
cost of a PASSIVE market order (`foxhunt.env.oracle.relative_cost`) per unit changed, without the env's caps
and fills, so the ratio is of the signal each can use, not of a backtest. Each cell is the unit-position
Sharpe over the folds' test bars, chained, over the oracle's: per seed, then the median over seeds.
"""

from __future__ import annotations

import argparse
import statistics

import attrs
import numpy as np

from foxhunt.data import LEARNING_SUITE, load, parse_spec
from foxhunt.data.synthetic import conditional_mean, spec_of
from foxhunt.env.config import EnvConfig
from foxhunt.env.oracle import (
    BANDS,
    CALIBRATION_BARS,
    CALIBRATION_SEED,
    THRESHOLDS,
    oracle_policy,
    relative_cost,
    threshold_targets,
)
from foxhunt.features import compute_features
from foxhunt.folds import FoldConfig, make_folds


def unit_pnl(targets: np.ndarray, close: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Per-bar P&L of holding ``targets[t]`` units from close t to t+1, paying ``cost[t]`` per unit changed at t
    (the first bar's change is from flat)."""
    changed = np.abs(np.diff(np.r_[0.0, targets[:-1]]))
    return targets[:-1] * (close[1:] / close[:-1] - 1.0) - cost[:-1] * changed


def sharpe(pnl: np.ndarray) -> float:
    spread = pnl.std()
    return float(pnl.mean() / spread) if spread > 0 else 0.0


def fitted_rule(values: np.ndarray, close: np.ndarray, cost: np.ndarray) -> tuple[float, float, bool]:
    """(slope, threshold, hold in band) fitted on one training window of one input."""
    next_return = np.diff(np.log(close))
    x = values[:-1]
    slope = float(np.dot(x, next_return) / np.dot(x, x)) if np.dot(x, x) > 0 else 0.0
    best, choice = -np.inf, (THRESHOLDS[0], True)
    for threshold in THRESHOLDS:
        for band in BANDS:
            targets = threshold_targets(slope * values, cost, threshold, band == "hold", 0.0)
            value = sharpe(unit_pnl(targets, close, cost))
            if value > best:
                best, choice = value, (threshold, band == "hold")
    return slope, *choice


def calibration_rules(dataset: str, features: str) -> dict[str, tuple[float, float, bool]]:
    """Each input's rule fitted on the model's long calibration path (after the feature set's warm-up)."""
    spec = attrs.evolve(parse_spec(LEARNING_SUITE[dataset]), seed=CALIBRATION_SEED, bars=CALIBRATION_BARS)
    market = load(spec.canonical())
    matrix = compute_features(market, features)
    close = np.asarray(market.close, dtype=np.float64)[matrix.warmup:]
    cost = relative_cost(close, market.instrument, EnvConfig())
    return {name: fitted_rule(np.asarray(matrix.values[matrix.warmup:, column], dtype=np.float64), close, cost)
            for column, name in enumerate(matrix.names)}


def seed_ratios(dataset: str, features: str, seed: int,
                fixed: dict[str, tuple[float, float, bool]] | None = None,
                folds: FoldConfig | None = None) -> dict[str, float]:
    """Each input's chained test-bar Sharpe over the oracle's, for one seed; ``fixed``: rules fitted elsewhere
    (:func:`calibration_rules`), else each fold's training bars fit them; ``folds``: the walk-forward layout
    (the defaults when None)."""
    market = load(attrs.evolve(parse_spec(LEARNING_SUITE[dataset]), seed=seed).canonical())
    matrix = compute_features(market, features)
    config = EnvConfig()
    close = np.asarray(market.close, dtype=np.float64)
    cost = relative_cost(close, market.instrument, config)
    policy = oracle_policy(market, config)
    model_mean = conditional_mean(spec_of(market), close)
    pnl: dict[str, list[np.ndarray]] = {name: [] for name in ("oracle", *matrix.names)}
    for fold in make_folds(len(market), folds or FoldConfig(), matrix.warmup):
        train, test = slice(fold.train.start, fold.train.stop), slice(fold.test.start, fold.test.stop)
        oracle = threshold_targets(model_mean[test], cost[test], policy.threshold, policy.band == "hold", 0.0)
        pnl["oracle"].append(unit_pnl(oracle, close[test], cost[test]))
        for column, name in enumerate(matrix.names):
            values = np.asarray(matrix.values[:, column], dtype=np.float64)
            slope, threshold, hold = fixed[name] if fixed else fitted_rule(values[train], close[train], cost[train])
            targets = threshold_targets(slope * values[test], cost[test], threshold, hold, 0.0)
            pnl[name].append(unit_pnl(targets, close[test], cost[test]))
    oracle_sharpe = sharpe(np.concatenate(pnl["oracle"]))
    return {name: sharpe(np.concatenate(pieces)) / oracle_sharpe for name, pieces in pnl.items() if name != "oracle"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # the random walk's oracle stays flat: there is no Sharpe to take a share of
    signal_markets = sorted(name for name in LEARNING_SUITE if name != "randomwalk")
    parser.add_argument("--dataset", choices=signal_markets, default="meanrev", help="a signal market of the suite")
    parser.add_argument("--features", default="horizons256", help="a built-in feature set (docs/data.md)")
    parser.add_argument("--first-seed", type=int, default=13, help="the first market seed (as benchmarks/learning.py)")
    parser.add_argument("--seeds", type=int, default=5, help="how many seeds, from --first-seed on")
    parser.add_argument("--fit-on", choices=("train", "calibration"), default="train",
                        help="fit each rule on the fold's training bars (default) or on a long path of the model")
    parser.add_argument("--fold-mode", choices=("rolling", "anchored"), default=FoldConfig().mode,
                        help="rolling: each fold trains on the bars just before its validation window; anchored: "
                             f"from the warm-up on (default {FoldConfig().mode}, as `folds.mode` in a run's config)")
    args = parser.parse_args()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    fixed = calibration_rules(args.dataset, args.features) if args.fit_on == "calibration" else None
    folds = FoldConfig(mode=args.fold_mode)
    per_seed = [seed_ratios(args.dataset, args.features, seed, fixed, folds) for seed in seeds]
    names = list(per_seed[0])
    fitted = "each fold's training bars" if fixed is None else f"a {CALIBRATION_BARS:,}-bar path of the model"
    print(f"{args.dataset}, `{args.features}` inputs, seeds {seeds.start}-{seeds.stop - 1}, {args.fold_mode} folds: "
          f"one input's threshold rule fitted on {fitted}, unit-position Sharpe over the oracle's on the folds' test bars\n")
    print("| input | " + " | ".join(f"seed {seed}" for seed in seeds) + " | median |")
    print("|---" * (len(per_seed) + 2) + "|")
    for name in names:
        ratios = [ratios_of_seed[name] for ratios_of_seed in per_seed]
        cells = " | ".join(f"{ratio:+.2f}" for ratio in ratios)
        print(f"| {name} | {cells} | {statistics.median(ratios):+.2f} |")


if __name__ == "__main__":
    main()
