"""The learning-quality test's short runs as a benchmark: every seed's figures, under any overrides.

    python benchmarks/learning_check.py --check ar1                          # the test's AR(1) check, seeds 1-20
    python benchmarks/learning_check.py --check ar1 --seeds 1-10 --jobs 2 \\
        --set 'plugins.gamma.minimum=[0.5,0.5,0.5,0.5]' --set 'plugins.gamma.maximum=[0.5,0.5,0.5,0.5]' \\
        --json g05.json                                                     # a variant, two runs at a time
    python benchmarks/learning_compare.py --base ar1.json --candidate g05.json --per-seed

``tests/trainer/test_learning_quality.py`` runs the same checks (``foxhunt.testing.learning_check``: one fold,
one epoch, about 20 s a run on a 2-core machine) and fails when a median misses its bar; it prints the seeds only
then. This prints one row per seed (agent and oracle Sharpe, agent/oracle or, on the random walk, turnover over
the every-bar churner's, round trips, seconds) and the median, for the check's own seeds or others (a fresh draw
checks a choice made on the test's). Each run has its own process with one torch thread, as the test runs, so
a figure here is the test's figure for that seed on the same machine. ``--json`` rewrites the file after every
finished run, in ``benchmarks/learning.py``'s shape, so ``learning_compare.py`` pairs two variants seed by seed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import multiprocessing
import statistics
import sys
import tempfile
from pathlib import Path

from foxhunt.testing.learning_check import CHECKS, CheckRun, run_check

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a sibling script, run as a program or loaded by a test
from learning import machine, write_results  # noqa: E402  (learning.py's file shape, so learning_compare.py reads both)


def seed_range(text: str) -> list[int]:
    """``"3"``, ``"1-20"`` or ``"1,4,9"`` as a list of seeds."""
    try:
        if "-" in text:
            first, last = (int(part) for part in text.split("-"))
            if last < first:
                raise ValueError
            return list(range(first, last + 1))
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: seeds are N, FIRST-LAST or N,M,...") from None
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:  # two runs of one seed would share a run directory, and a paired comparison refuses the file
        raise argparse.ArgumentTypeError(f"{text!r}: seed {repeated[0]} is named twice")
    return seeds


def positive(text: str) -> int:
    """``--jobs``: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: runs at a time is a whole number of at least 1")
    return int(text)


def one_run(check: str, seed: int, overrides: list[str], root: str) -> CheckRun:
    """One seed in this process, as the test runs it: one torch thread, numba's pool at one thread."""
    import numba
    import structlog
    import torch

    torch.set_num_threads(1)
    numba.set_num_threads(1)  # several runs at once would otherwise oversubscribe the cores
    # A benchmark is a program, so it may configure logging: keep the table readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    return run_check(CHECKS[check], seed, Path(root), overrides)


def row(run: CheckRun) -> str:
    if run.oracle_sharpe is not None:
        return (f"| {run.seed} | {run.agent_sharpe:+.2f} | {run.oracle_sharpe:+.2f} | {run.value:+.2f} | "
                f"{run.round_trips} | {run.seconds:.0f} |")
    return (f"| {run.seed} | {run.agent_sharpe:+.2f} | - | {run.value:.2f} | {run.round_trips} | "
            f"{run.seconds:.0f} |")


def table(check: str, runs: list[CheckRun]) -> list[str]:
    """The per-seed markdown table and its median line."""
    churn = CHECKS[check].measure == "churn"
    measure = "turnover / churner's" if churn else "agent/oracle"
    lines = [f"| seed | agent Sharpe | oracle Sharpe | {measure} | round trips | s |", "|---|---|---|---|---|---|"]
    lines += [row(run) for run in sorted(runs, key=lambda run: run.seed)]
    values = [run.value for run in runs]
    losing = sum(run.agent_sharpe <= 0.0 for run in runs)
    lines.append(f"\n{check}: median {measure} {statistics.median(values):.2f} over {len(runs)} seeds "
                 f"(IQR {_quartile(values, 0):.2f} to {_quartile(values, 2):.2f}); {losing} without a profit")
    return lines


def _quartile(values: list[float], which: int) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[which] if len(values) > 1 else values[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", choices=sorted(CHECKS), default="ar1",
                        help="the check to run (default ar1: the AR(1) market, a 3 000-bar test window)")
    parser.add_argument("--seeds", type=seed_range, default=None,
                        help="N, FIRST-LAST or N,M,... (default: the check's own, as the test runs it)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="a config override after the check's own (repeatable)")
    parser.add_argument("--jobs", type=positive, default=1, help="runs at a time, each in its own process")
    parser.add_argument("--json", dest="json_out", type=Path, default=None,
                        help="keep every run here (rewritten as runs finish)")
    args = parser.parse_args(argv)
    seeds = args.seeds if args.seeds is not None else list(CHECKS[args.check].seeds)
    settings = {"check": args.check, "seeds": seeds, "overrides": args.overrides, "jobs": args.jobs,
                "machine": machine()}
    print(f"# {len(seeds)} runs of the {args.check} check, {args.jobs} at a time; overrides: "
          f"{args.overrides or 'none'}", file=sys.stderr, flush=True)
    finished: list[CheckRun] = []
    with tempfile.TemporaryDirectory() as root:
        # spawn: a forked child would inherit torch's and numba's thread pools in an undefined state
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
            futures = [pool.submit(one_run, args.check, seed, args.overrides, root) for seed in seeds]
            for future in concurrent.futures.as_completed(futures):
                run = future.result()
                finished.append(run)
                print(f"# [{len(finished)}/{len(seeds)}] seed {run.seed}: {row(run)}", file=sys.stderr, flush=True)
                if args.json_out is not None:
                    write_results(args.json_out, settings,
                                  [run.as_learning_run() for run in sorted(finished, key=lambda run: run.seed)],
                                  len(seeds))
    print("\n".join(table(args.check, finished)), flush=True)


if __name__ == "__main__":
    main()
