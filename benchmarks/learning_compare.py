"""Paired comparison of two learning-benchmark results, seed by seed.

Five seeds' medians move more from one seed draw to the next than most changes move them (docs/learner.md), so
a change is judged on pairs: the same dataset and seed under the base and the candidate config, which see the
same market path and the same test windows. For each dataset this prints the measure's median under each, the
median paired difference, how many seeds the candidate is ahead, behind or equal, and the two-sided exact sign
test's p-value (ties dropped): the chance of a split at least that lopsided if the change made no difference.
``--per-seed`` adds each dataset's paired values seed by seed, the lists docs/learner.md's tables quote.

The measure is agent/oracle where the oracle made money on the run's windows, round trips on the random walk
(whose oracle stays flat: fewer is better) and the agent's Sharpe elsewhere (the bundled data).

    python benchmarks/learning.py --first-seed 13 --seeds 5 --json base.json
    python benchmarks/learning.py --first-seed 13 --seeds 5 --set learner.weight_decay=1.0 --json wd.json
    python benchmarks/learning_compare.py --base base.json --candidate wd.json

Several files per side join their runs (seeds 13-17 in one, 18-22 in another); ``--base-variant`` and
``--candidate-variant`` pick one variant out of an ``--ablation`` file.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["measure_of", "read_results", "machine_of", "load_runs", "sign_test", "compare", "main"]


def measure_of(run: dict[str, Any]) -> tuple[str, float, bool]:
    """``(name, value, higher_is_better)`` of one run: agent/oracle, else round trips on a flat oracle's market,
    else the agent's Sharpe."""
    oracle = run.get("oracle")
    if oracle is not None and oracle["sharpe"] > 0:
        return "agent/oracle", run["agent"]["sharpe"] / oracle["sharpe"], True
    if oracle is not None:
        return "round trips", float(run["agent"]["round_trips"]), False
    return "agent Sharpe", run["agent"]["sharpe"], True


def read_results(path: Path) -> dict[str, Any]:
    """One ``learning.py --json`` file's document; a file that is not one exits naming it."""
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"{path}: not a learning.py --json file ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("runs"), list):
        raise SystemExit(f"{path}: no 'runs' list: not a learning.py --json file")
    return document


def load_runs(paths: list[Path], variant: str | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    """The runs of ``paths`` (``learning.py --json`` files) keyed by ``(dataset, seed)``; with ``variant``, only
    that ablation variant's. Refuses a key that two runs share: which of them to pair would be a guess."""
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    origin: dict[tuple[str, int], str] = {}
    for path in paths:
        for index, run in enumerate(read_results(path)["runs"]):
            if variant is not None and run.get("variant") != variant:
                continue
            key = (run["dataset"], int(run["seed"]))
            if key in runs:
                hint = " (an --ablation file: pick one with --base-variant/--candidate-variant)" if "variant" in run else ""
                raise SystemExit(f"{path}: run {index} repeats dataset {key[0]!r} seed {key[1]}, already read from "
                                 f"{origin[key]}{hint}")
            runs[key], origin[key] = run, str(path)
    if not runs:
        raise SystemExit(f"no runs in {', '.join(map(str, paths))}" + (f" for variant {variant!r}" if variant else ""))
    return runs


def machine_of(document: dict[str, Any]) -> str:
    """The machine a results document was run on, as ``learning.py`` records it ("not recorded" in older files)."""
    return document.get("args", {}).get("machine", "not recorded")


def machines_of(paths: list[Path]) -> set[str]:
    """The machines ``paths`` were run on."""
    return {machine_of(read_results(path)) for path in paths}


def sign_test(ahead: int, behind: int) -> float:
    """Two-sided exact sign test: P(a split at least as uneven as ``ahead``/``behind``) under a fair coin."""
    n = ahead + behind
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(ahead, behind) + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(base: dict[tuple[str, int], dict[str, Any]],
            candidate: dict[tuple[str, int], dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per dataset the two share a seed of, in the base's order: the paired measure's summary."""
    rows = []
    for name in dict.fromkeys(dataset for dataset, _ in base):
        seeds = sorted(seed for dataset, seed in base if dataset == name and (dataset, seed) in candidate)
        if not seeds:
            continue
        measured = []
        for seed in seeds:
            label, before, higher = measure_of(base[name, seed])
            other, after, _ = measure_of(candidate[name, seed])
            if other == label:  # else an oracle that lost on one side's windows only: not the same yardstick
                measured.append((label, higher, seed, before, after))
        if not measured:
            continue
        # the dataset's yardstick is its seeds' most common one (a signal market whose oracle lost on one seed's
        # windows would read round trips there): a row never mixes two measures
        label, higher = Counter((label, higher) for label, higher, *_ in measured).most_common(1)[0][0]
        pairs = [(seed, before, after) for other, _, seed, before, after in measured if other == label]
        sign = 1.0 if higher else -1.0
        ahead = sum(sign * (after - before) > 0 for _, before, after in pairs)
        behind = sum(sign * (after - before) < 0 for _, before, after in pairs)
        rows.append({
            "dataset": name, "measure": label, "higher_is_better": higher, "seeds": [seed for seed, _, _ in pairs],
            "base_values": [before for _, before, _ in pairs], "candidate_values": [after for _, _, after in pairs],
            "base": statistics.median(before for _, before, _ in pairs),
            "candidate": statistics.median(after for _, _, after in pairs),
            "difference": statistics.median(after - before for _, before, after in pairs),
            "ahead": ahead, "behind": behind, "equal": len(pairs) - ahead - behind,
            "p": sign_test(ahead, behind),
        })
    return rows


def _seed_list(seeds: list[int]) -> str:
    contiguous = seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"{seeds[0]}-{seeds[-1]}" if contiguous and len(seeds) > 2 else ", ".join(map(str, seeds))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="ahead/behind count seeds where the candidate is better/worse on the "
                                            "measure (fewer round trips is better on the random walk)")
    parser.add_argument("--base", type=Path, nargs="+", required=True, help="learning.py --json files of the base")
    parser.add_argument("--candidate", type=Path, nargs="+", required=True, help="the same for the candidate")
    parser.add_argument("--base-variant", default=None, help="one variant of an --ablation base file")
    parser.add_argument("--candidate-variant", default=None, help="one variant of an --ablation candidate file")
    parser.add_argument("--per-seed", action="store_true",
                        help="also print each dataset's base and candidate value seed by seed")
    args = parser.parse_args(argv)
    rows = compare(load_runs(args.base, args.base_variant), load_runs(args.candidate, args.candidate_variant))
    if not rows:
        raise SystemExit("the two sides share no (dataset, seed) pair")
    base_machines, candidate_machines = machines_of(args.base), machines_of(args.candidate)
    if base_machines != candidate_machines:
        print(f"warning: the base ran on {' | '.join(sorted(base_machines))}, the candidate on "
              f"{' | '.join(sorted(candidate_machines))}: one seed trains differently on another machine, so each "
              "difference below holds that too", file=sys.stderr)
    digits = {"agent/oracle": 2, "round trips": 0, "agent Sharpe": 2}
    # a value's format per measure; a count is never negative, so round trips carry no sign
    value_format = {measure: f"{'' if measure == 'round trips' else '+'}.{d}f" for measure, d in digits.items()}
    print("| dataset | measure | seeds | base, median | candidate, median | paired difference, median | "
          "candidate ahead | behind | equal | sign test p |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        d, value = digits[row["measure"]], value_format[row["measure"]]
        print(f"| {row['dataset']} | {row['measure']}{'' if row['higher_is_better'] else ' (fewer is better)'} | "
              f"{_seed_list(row['seeds'])} | {row['base']:{value}} | {row['candidate']:{value}} | "
              f"{row['difference']:+.{d}f} | {row['ahead']} | {row['behind']} | {row['equal']} | {row['p']:.2f} |")
    if args.per_seed:
        print()
        print("| dataset | measure | seeds | base, per seed | candidate, per seed |")
        print("|---|---|---|---|---|")
        for row in rows:
            values = [", ".join(format(number, value_format[row["measure"]]) for number in row[side])
                      for side in ("base_values", "candidate_values")]
            print(f"| {row['dataset']} | {row['measure']} | {', '.join(map(str, row['seeds']))} | {values[0]} | "
                  f"{values[1]} |")


if __name__ == "__main__":
    main()
