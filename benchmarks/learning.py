"""Learning-quality benchmark: `foxhunt train` on the synthetic learning suite and the bundled data, over seeds.

    python benchmarks/learning.py                          # CPU, 5 seeds, every dataset, the default config
    python benchmarks/learning.py --jobs 2                 # two seeds at a time, in separate processes
    python benchmarks/learning.py --quick                  # smoke run: 2 seeds, 1 fold, 1 short epoch
    python benchmarks/learning.py --device cuda --datasets ar1-medium randomwalk --json runs.json
    python benchmarks/learning.py --table a.json b.json    # one table of runs already made, joined; trains nothing
    python benchmarks/learning.py --ablation combiners     # one row per gradient combiner and dataset
    python benchmarks/learning.py --ablation recovery      # plateau recovery off against on
    python benchmarks/learning.py --ablation popart        # PopArt's moments against its robust quartiles
    python benchmarks/learning.py --ablation targets       # greedy (double DQN) against Expected-SARSA targets
    python benchmarks/learning.py --ablation conviction    # no conviction floor against a floor of 0.25σ
    python benchmarks/learning.py --ablation plans         # no trade plans against a stop and target, and a horizon
    python benchmarks/learning.py --ablation execution     # execution credit: off, the regret, regret + shaping, split
    python benchmarks/learning.py --ablation heads         # quantile heads and horizon values, each and both
    python benchmarks/learning.py --ablation atoms         # even atoms against quantile-placed and learned atoms
    python benchmarks/learning.py --ablation horizons      # 3-step returns, 16-step, and 16 mixed with 3 (n_step_mix)

Each run trains with the default config (plus ``--set`` overrides) and reads the
run's ``summary.json``. Per dataset it prints one row: the agent's Sharpe after
costs over the reported windows (median and interquartile range over seeds), the
oracle's Sharpe on exactly those windows (synthetic markets: the calibrated
threshold policy of ``foxhunt.env.oracle`` run through the same env physics and
EnvConfig), agent/oracle, buy-and-hold, round trips, the folds whose test window had no round trip (over
every seed: on a signal market, a collapse to no trade or to a position never closed), turnover and wall time. A
synthetic market is drawn fresh per seed (market seed = run seed), so the spread
covers both the agent's and the market's randomness; the bundled data is fixed.
``--json`` keeps every run's overall figures and, per fold, every epoch's validation Sharpe, the selected
policy's, the flat-fold retries it trained (``[train] flat_fold_retries``; each finished run's progress line names
the folds a retry trained again), and its test figures and equity curve (``benchmarks/validation_gate.py`` reads
them). The file is
rewritten after every finished run, so a benchmark stopped part way (Ctrl-C, a time limit) keeps the runs it
finished; its ``planned_runs`` against the length of ``runs`` tells whether it is complete.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import logging
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from foxhunt.data import LEARNING_SUITE, parse_spec
from foxhunt.env.oracle import oracle_backtest
from foxhunt.data.synthetic import PREFIX

REAL = {"eurusd": "eurusd-1h-2017", "sp500": "sp500-1d-1999-2018"}
# Run by default: the suite and the bundled data. `planted` (daily, SYNTH costs) is the older planted-signal
# market, kept selectable by name.
DEFAULT_DATASETS = [*LEARNING_SUITE, *REAL]
DATASETS: dict[str, str] = {**LEARNING_SUITE, **REAL, "planted": "synthetic:planted?bars=5000"}
# --quick: one fold, one short epoch; enough to exercise every column, not to learn anything.
QUICK_OVERRIDES = ["folds.n_folds=1", "train.epochs=1", "train.env_steps_per_epoch=960", "train.updates_per_epoch=60",
                   "train.warmup_env_steps=512", "env.n_envs=16"]
QUICK_SEEDS = 2
DEFAULT_SEEDS = 5
# The execution credit's two switches (docs/learner.md, "Execution credit"), on and off.
_CREDIT_ON = ["learner.execution_regret=true", "learner.shaping_only=true"]
_CREDIT_OFF = ["learner.execution_regret=false", "learner.shaping_only=false"]
# --ablation NAME: the same runs under each variant's overrides (added after --set), one table row per variant
# and dataset. The first variant is the default it is measured against.
ABLATIONS: dict[str, dict[str, list[str]]] = {
    "combiners": {  # docs/learner.md, "Gradient combiners"
        "budgeted_sum (default)": [],
        "pcgrad": ['learner.combiner="pcgrad"'],
        "uncertainty": ['learner.combiner="uncertainty"'],
    },
    "encoders": {  # docs/learner.md, "Encoders": the window plugins at their default settings (16 bars); measured on the trend
        "mlp (default)": [],
        "attention": ['learner.encoder="attention"'],
        "scan": ['learner.encoder="scan"'],
        "grn": ['learner.encoder="grn"'],
        "vsn": ['learner.encoder="vsn"'],
    },
    "recovery": {  # docs/learner.md, "Plateau recovery" (measured: worse on, at the default run length)
        "off (default)": [],
        "on": ["train.recovery.enabled=true"],
    },
    "augment": {  # docs/learner.md, "Replay augmentations"
        "none": ["plugins.mirror.enabled=false"],
        "mirror (default)": [],
        "mirror+hindsight": ["plugins.hindsight.enabled=true"],
    },
    "iql": {  # docs/learner.md, "IQL value head": off by default (measured worse on mean reversion)
        "off (default)": [],
        # c51 gives the value head its default budget (0.10), so the budgets still sum to 1
        "on": ["plugins.iql.enabled=true", "learner.budgets.c51=0.3"],
    },
    "auxiliary": {  # docs/learner.md, "Auxiliary tasks": off by default
        "off (default)": [],
        # c51 gives the two tasks their default budgets (0.05 each), so the budgets still sum to 1
        "on": ["plugins.auxiliary.enabled=true", "learner.budgets.c51=0.3"],
        "on, weights 0.1": ["plugins.auxiliary.enabled=true", "learner.budgets.c51=0.3",
                            "plugins.auxiliary.return_weight=0.1", "plugins.auxiliary.regime_weight=0.1"],
    },
    "heads": {  # docs/learner.md, "Multi-quantile head" and "Horizon-decomposed values": both off by default
        "off (default)": [],
        # c51 gives each head its default budget (0.05), so the budgets still sum to 1
        "quantiles": ["plugins.quantiles.enabled=true", "learner.budgets.c51=0.35"],
        "horizon_values": ["plugins.horizon_values.enabled=true", "learner.budgets.c51=0.35"],
        "both": ["plugins.quantiles.enabled=true", "plugins.horizon_values.enabled=true", "learner.budgets.c51=0.3"],
    },
    "atoms": {  # docs/learner.md, "Atom spacing": uniform by default
        "uniform (default)": [],
        "quantile": ['learner.atom_spacing="quantile"'],
        "learned": ['learner.atom_spacing="learned"'],
    },
    "popart": {  # docs/learner.md, "Robust PopArt": off by default (no better on mean reversion)
        "moments (default)": [],
        "robust": ['learner.popart_stats="robust"'],
    },
    "targets": {  # docs/learner.md, "Expected-SARSA targets": off by default (worse on mean reversion)
        "greedy (default)": [],
        "expected_sarsa": ['learner.target_policy="expected_sarsa"'],
    },
    "plans": {  # docs/fill-model.md, "Trade plans": off by default. Distances for the suite's hourly markets
        # (0.1 % volatility per bar): a stop 4σ and a target 8σ away from the entry, then a day's horizon too.
        "off (default)": [],
        "stop 0.4 %, target 0.8 %": ["plugins.trade_plans.enabled=true", "plugins.trade_plans.stop=0.004",
                                     "plugins.trade_plans.target=0.008"],
        "and a 24-bar horizon": ["plugins.trade_plans.enabled=true", "plugins.trade_plans.stop=0.004",
                                 "plugins.trade_plans.target=0.008", "plugins.trade_plans.horizon=24"],
    },
    "mechanisms": {  # four off-by-default learner mechanisms, one at a time against one shared default:
        # docs/learner.md, "Measured: the IQL head, robust PopArt, Expected-SARSA targets and hindsight"
        "default": [],
        "iql": ["plugins.iql.enabled=true", "learner.budgets.c51=0.3"],
        "robust popart": ['learner.popart_stats="robust"'],
        "expected_sarsa": ['learner.target_policy="expected_sarsa"'],
        "hindsight": ["plugins.hindsight.enabled=true"],
    },
    "bars": {  # docs/data.md, "Volume bars": time bars by default. The threshold is EUR/USD's scale (hourly volume
        # ~1e8-1e10), so this ablation is meant for --datasets eurusd
        "time (default)": [],
        "volume 2e9": ['data.bars="volume"', "data.volume_per_bar=2e9"],
    },
    "conviction": {  # docs/learner.md, "Conviction floor" and "Conviction spread": both off by default
        "off (default)": [],
        "floor 0.25σ": ["learner.conviction_floor=0.25"],
        "spread 0.5": ["learner.conviction_spread=0.5"],
    },
    "decay": {  # docs/learner.md, "Weight decay", "Weight decay on the trunk"
        "1e-5 on all (default)": [],
        "1.0 on all": ["learner.weight_decay=1.0"],
        "3.0 on the trunk": ["learner.weight_decay=3.0", 'learner.weight_decay_scope="trunk"'],
        # docs/learner.md, "The trunk's decay with averaged epochs"
        "3.0 on the trunk, best 3 averaged": ["learner.weight_decay=3.0", 'learner.weight_decay_scope="trunk"',
                                              "train.policy_epochs=3"],
    },
    "epochs": {  # docs/learner.md, "Averaging the best epochs"
        "best epoch": ["train.policy_epochs=1"],
        "best 2 averaged": ["train.policy_epochs=2"],
        "best 3 averaged": ["train.policy_epochs=3"],
        "all 4 averaged": ["train.policy_epochs=4"],
    },
    "execution": {  # docs/learner.md, "Execution credit"
        "joint (off)": _CREDIT_OFF,
        "regret": ["learner.execution_regret=true", "learner.shaping_only=false"],
        "regret+shaping (profiles)": _CREDIT_ON,
        # docs/learner.md, "Reward split": the direction priced at a PASSIVE market order instead of the greedy execution
        "split+shaping": ["learner.reward_split=true", "learner.execution_regret=false", "learner.shaping_only=true"],
    },
    "horizons": {  # docs/learner.md, "Mixed return horizons": n_step_mix off by default
        "n_step 3 (default)": [],
        "n_step 16": ["learner.n_step=16"],
        "n_step 16 mixed with 3": ["learner.n_step=16", "learner.n_step_mix=3"],
    },
    "level": {  # docs/learner.md, "Execution credit and a 256-bar level" and "Both profiles take the 512-bar
        # level": the inputs and the credit, each named in every variant, so the labels hold under any profile
        "horizons512, credit (profiles)": ['features.feature_set="horizons512"', *_CREDIT_ON],
        "horizons256, credit": ['features.feature_set="horizons256"', *_CREDIT_ON],
        "horizons256, no credit": ['features.feature_set="horizons256"', *_CREDIT_OFF],
        "horizons, credit": ['features.feature_set="horizons"', *_CREDIT_ON],
        "horizons, no credit": ['features.feature_set="horizons"', *_CREDIT_OFF],
        # docs/learner.md, "An exponentially weighted level": horizons256 and ewz_256
        "horizons_ew, credit": ['features.feature_set="horizons_ew"', *_CREDIT_ON],
    },
}


def reported_windows(summary: dict[str, Any]) -> list[tuple[int, int]]:
    """The bar windows ``[start, stop)`` that ``summary["overall"]`` is computed over, fold by fold.

    The one place that knows where summary.json keeps them: each fold's held-out
    ``"test_window"`` (selection happens on the validation window before it).
    """
    return [(int(fold["test_window"][0]), int(fold["test_window"][1])) for fold in summary["folds"]]


def fold_records(run_path: Path, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Per fold, what a selection rule could have known and what it got: every epoch's validation Sharpe (in
    epoch order, from ``metrics.jsonl``), the selected policy's validation Sharpe, and its test trade counts and
    test equity curve (``equity/``). ``benchmarks/validation_gate.py`` reads these from the ``--json`` file."""
    from foxhunt.trainer.run_dir import equity_file_name

    epochs: dict[int, list[float]] = {}
    for line in (run_path / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "validation" in row:
            epochs.setdefault(int(row["fold"]), []).append(float(row["validation"]["sharpe"]))
    records = []
    for fold in summary["folds"]:
        index = int(fold["fold"])
        with open(run_path / "equity" / equity_file_name(index, "test"), newline="") as text:
            test_equity = [float(row["agent"]) for row in csv.DictReader(text)]
        test = fold["test"]["agent"]
        records.append({
            "fold": index,
            "validation_bars": int(fold["validation_window"][1]) - int(fold["validation_window"][0]),
            "validation_sharpes": epochs.get(index, []),
            "selected_validation_sharpe": float(fold["validation"]["agent"]["sharpe"]),
            "flat_fold_retries": int(fold["flat_fold_retries"]),  # [train] flat_fold_retries: the retries it trained
            "test": {"sharpe": float(test["sharpe"]), "fills": int(test["fills"]), "round_trips": int(test["round_trips"]),
                     "turnover": float(test["turnover"])},
            "test_equity": test_equity,
        })
    return records


def source_for(name: str, seed: int) -> str:
    """The dataset's source for one seed: a synthetic market is redrawn with the run's seed."""
    source = DATASETS[name]
    if source.startswith(PREFIX):
        return attrs.evolve(parse_spec(source), seed=seed).canonical()
    return source


def run_once(name: str, seed: int, device: str, overrides: list[str], threads: int) -> dict[str, Any]:
    """Train one seed on one dataset; the agent's, buy-and-hold's and (synthetic) the oracle's overall figures."""
    import structlog
    import torch

    from foxhunt.config import load_config
    from foxhunt.trainer.evaluation import combine
    from foxhunt.trainer.run_dir import RunDirectory
    from foxhunt.trainer.trainer import Trainer

    torch.set_num_threads(threads)
    # numba's CPU kernels otherwise use every core in every process: with --jobs > 1 the pools
    # oversubscribe the machine and spin against each other (measured 5x slower on 2 cores).
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    # A benchmark is a program, so it may configure logging: keep the table readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    source = source_for(name, seed)
    config = load_config(None, [f'data.source="{source}"', f"run.seed={seed}", f'run.device="{device}"', *overrides])
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = RunDirectory(Path(tmp) / "run")
        started = time.perf_counter()
        trainer = Trainer(config, run_dir, show_progress=False)
        trainer.run()
        wall = time.perf_counter() - started
        summary = json.loads((run_dir.path / "summary.json").read_text())
        folds = fold_records(run_dir.path, summary)
    windows = reported_windows(summary)
    oracle = None
    market = trainer.data.market  # the bars the run trained and was tested on, not a second load of them
    if source.startswith(PREFIX):
        results = [oracle_backtest(market, config.env, window) for window in windows]
        oracle = combine(
            [r.equity for r in results], [r.fills for r in results], [r.round_trips for r in results],
            [r.turnover for r in results],
            market.instrument.bars_per_year,
        )
    return {
        "dataset": name,
        "source": source,
        "seed": seed,
        "windows": [list(w) for w in windows],
        "agent": summary["overall"]["agent"],
        "buy_and_hold": summary["overall"]["buy_and_hold"],
        "oracle": oracle,
        "wall_s": wall,
        "bars_per_year": float(market.instrument.bars_per_year),
        "folds": folds,
    }


def _median_iqr(values: list[float], digits: int = 2, signed: bool = True) -> str:
    if not values:
        return "-"
    q25, q50, q75 = np.percentile(values, [25, 50, 75])
    number = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f"{number.format(q50)} [{number.format(q25)}, {number.format(q75)}]"


def table_rows(runs: list[dict[str, Any]]) -> list[str]:
    """The markdown table: one row per dataset (per variant and dataset in an ablation), in the order first seen."""
    ablation = any("variant" in run for run in runs)
    lines = [
        ("| variant " if ablation else "")
        + "| dataset | seeds | agent Sharpe, median [IQR] | oracle Sharpe | agent/oracle, median [IQR] | buy & hold Sharpe | "
        "agent > B&H | round trips, median [IQR] | folds with no round trip | turnover, median [IQR] | wall s/run |",
        ("|---" if ablation else "") + "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant, name in dict.fromkeys((run.get("variant"), run["dataset"]) for run in runs):
        rows = [run for run in runs if run["dataset"] == name and run.get("variant") == variant]
        agent = [run["agent"]["sharpe"] for run in rows]
        hold = [run["buy_and_hold"]["sharpe"] for run in rows]
        oracles = [run["oracle"]["sharpe"] for run in rows if run["oracle"] is not None]
        # A ratio is only meaningful against an oracle that made money on those windows (never on the random walk).
        ratios = [run["agent"]["sharpe"] / run["oracle"]["sharpe"] for run in rows if run["oracle"] and run["oracle"]["sharpe"] > 0]
        oracle_cell = f"{statistics.median(oracles):+.2f}" if oracles else "-"
        if oracles and not ratios:
            ratio_cell = "n/a (oracle flat)"
        else:
            ratio_cell = _median_iqr(ratios) + (f" ({len(ratios)}/{len(rows)} seeds)" if oracles and len(ratios) < len(rows) else "")
        beats = sum(a > h for a, h in zip(agent, hold))
        # A test window the selected policy never closed a position on: on a signal market that is the collapse
        # issue 12 counts (no trade, or a position never closed); on the random walk it is the right answer.
        folds = [fold for run in rows for fold in run["folds"]]
        idle = sum(fold["test"]["round_trips"] == 0 for fold in folds)
        lines.append(
            (f"| {variant} " if ablation else "") + f"| {name} | {len(rows)} | {_median_iqr(agent)} | {oracle_cell} | {ratio_cell} | {statistics.median(hold):+.2f} | "
            f"{beats}/{len(rows)} | {_median_iqr([run['agent']['round_trips'] for run in rows], 0, False)} | "
            f"{idle}/{len(folds)} | "
            f"{_median_iqr([run['agent']['turnover'] for run in rows], 1, False)} | "
            f"{statistics.median(run['wall_s'] for run in rows):.0f} |"
        )
    return lines


def _report(variant: str | None, run: dict[str, Any], done: int, total: int) -> None:
    """One line on stderr per finished run, so a long ablation shows its progress and its numbers as they come."""
    oracle = run.get("oracle") or {}
    ratio = (f"  agent/oracle {run['agent']['sharpe'] / oracle['sharpe']:+.2f}"
             if oracle.get("sharpe", 0.0) > 0 else "")
    label = f"{variant} " if variant else ""
    retried = [fold["fold"] for fold in run["folds"] if fold["flat_fold_retries"]]
    retries = f", flat-fold retries in fold {', '.join(map(str, retried))}" if retried else ""
    print(f"# [{done}/{total}] {label}{run['dataset']} seed {run['seed']}: Sharpe {run['agent']['sharpe']:+.2f}"
          f"{ratio}, {run['agent']['round_trips']} round trips{retries}, {run['wall_s']:.0f} s", file=sys.stderr,
          flush=True)


def machine() -> str:
    """The host the runs train on: its CPU model, the GPU torch sees (if any) and torch's version. Recorded in
    the results file, because one seed's run differs from machine to machine (another CPU or GPU rounds
    differently), so `learning_compare.py` says when it pairs runs of two machines."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), cpu)
    except OSError:
        pass  # not Linux: platform's name stands
    gpu = [torch.cuda.get_device_name(0)] if torch.cuda.is_available() else []
    return "; ".join([cpu, *gpu, f"torch {torch.__version__}"])


def runs_of_files(paths: list[Path]) -> list[dict[str, Any]]:
    """Every run of ``paths`` (``--json`` files, e.g. two processes' seeds of one command), in file order.

    Refuses a run two files share (the same variant, dataset and seed): a table that counted it twice would
    look like one more seed. Refuses a run without this script's per-fold records (``learning_check.py``'s runs
    pair with ``learning_compare.py`` but have no folds or buy-and-hold to table). Warns on stderr when the files
    ran on different machines."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # a sibling script, run as a program or by a test
    from learning_compare import machine_of, read_results

    runs: list[dict[str, Any]] = []
    origin: dict[tuple[Any, ...], Path] = {}
    machines: set[str] = set()
    for path in paths:
        document = read_results(path)
        machines.add(machine_of(document))
        for index, run in enumerate(document["runs"]):
            missing = [key for key in ("folds", "buy_and_hold") if key not in run]
            if missing:
                raise SystemExit(f"{path}: run {index} has no {' or '.join(missing)}: not a run of learning.py "
                                 "(learning_check.py's files are read by learning_compare.py)")
            key = (run.get("variant"), run["dataset"], int(run["seed"]))
            if key in origin:
                raise SystemExit(f"{path}: run {index} repeats dataset {key[1]!r} seed {key[2]}"
                                 + (f" of variant {key[0]!r}" if key[0] is not None else "")
                                 + f", already read from {origin[key]}")
            origin[key] = path
            runs.append(run)
    if len(machines) > 1:
        print(f"warning: these runs come from {len(machines)} machines ({' | '.join(sorted(machines))}): one seed "
              "trains differently on another machine", file=sys.stderr)
    return runs


def write_results(path: Path, settings: dict[str, Any], runs: list[dict[str, Any]], planned: int) -> None:
    """``runs`` so far, with the command's settings, to ``path``: written beside it and renamed over it, so a
    reader (or a benchmark killed mid-write) never sees half a file."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps({"args": settings, "planned_runs": planned, "runs": runs}, indent=1))
    os.replace(partial, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0 .. N-1 per dataset (default 5; --quick: 2)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="start the seeds here (--first-seed 4 --seeds 4: seeds 4..7, fresh draws for a choice made on 0..3)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 seeds, one fold, one short epoch")
    parser.add_argument("--datasets", nargs="*", default=None, choices=list(DATASETS),
                        help="default: the learning suite and the bundled data")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel, each in its own process")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="extra config override")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per run, as `foxhunt train` sets them")
    parser.add_argument("--json", dest="json_out", type=Path, default=None,
                        help="write every run's raw results here, with per-fold records (validation_gate.py "
                        "reads them)")
    parser.add_argument("--ablation", choices=sorted(ABLATIONS), default=None,
                        help="run every variant of one mechanism (after the --set overrides), one row per variant")
    parser.add_argument("--table", nargs="+", type=Path, default=None, metavar="RESULTS",
                        help="train nothing: print the table of the runs in these --json files, joined (two "
                        "processes' seeds of one command, or an older file read with today's columns)")
    args = parser.parse_args()
    if args.table:
        print("\n".join(table_rows(runs_of_files(args.table))))
        return
    names = args.datasets or DEFAULT_DATASETS
    count = args.seeds if args.seeds is not None else QUICK_SEEDS if args.quick else DEFAULT_SEEDS
    seeds = range(args.first_seed, args.first_seed + count)
    overrides = [*(QUICK_OVERRIDES if args.quick else []), *args.overrides]
    variants = ABLATIONS[args.ablation] if args.ablation else {None: []}
    labelled = [(variant, (name, seed, args.device, [*overrides, *extra], args.threads))
                for variant, extra in variants.items() for name in names for seed in seeds]
    jobs = [job for _, job in labelled]
    settings = {**vars(args), "json_out": str(args.json_out), "seeds": list(seeds), "overrides": overrides,
                "machine": machine()}
    finished: list[dict[str, Any]] = []

    def record(variant: str | None, run: dict[str, Any]) -> dict[str, Any]:
        run = {**run, "variant": variant} if args.ablation else run
        finished.append(run)
        _report(variant, run, len(finished), len(jobs))
        if args.json_out is not None:
            write_results(args.json_out, settings, finished, len(jobs))
        return run

    print(f"# {len(jobs)} runs on {args.device}, {args.jobs} at a time; overrides: {overrides or 'none'}", file=sys.stderr, flush=True)
    if args.jobs > 1:
        # spawn: a forked child would inherit torch's and numba's thread pools in an undefined state.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
            futures = {pool.submit(run_once, *job): variant for variant, job in labelled}  # in labelled order
            recorded = {future: record(futures[future], future.result())
                        for future in concurrent.futures.as_completed(futures)}
            runs = [recorded[future] for future in futures]
    else:
        runs = [record(variant, run_once(*job)) for variant, job in labelled]
    print("\n".join(table_rows(runs)), flush=True)
    if args.json_out is not None:  # once more, in the command's order rather than the order runs finished
        write_results(args.json_out, settings, runs, len(jobs))


if __name__ == "__main__":
    main()
