"""benchmarks/learning_compare.py: the sign test against its binomial definition, the measure each market is judged
on, seed pairing (and its refusals), and the table the script prints from two learning.py --json files."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.benchmark_scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "learning_compare.py"


def compare_module():
    return load_script("learning_compare")


def run(dataset: str, seed: int, sharpe: float, oracle: float | None, round_trips: int = 10,
        variant: str | None = None) -> dict:
    record = {"dataset": dataset, "seed": seed, "agent": {"sharpe": sharpe, "round_trips": round_trips},
              "oracle": None if oracle is None else {"sharpe": oracle}}
    return record if variant is None else {**record, "variant": variant}


def write(path: Path, runs: list[dict], machine: str | None = None) -> Path:
    path.write_text(json.dumps({"args": {} if machine is None else {"machine": machine}, "runs": runs}))
    return path


@given(st.integers(0, 12), st.integers(0, 12))
def test_sign_test_is_the_two_sided_binomial_tail(ahead: int, behind: int) -> None:
    n = ahead + behind
    # every split of n fair coin flips at most as likely as the observed one counts (ties of probability included)
    observed = math.comb(n, ahead)
    expected = sum(math.comb(n, k) for k in range(n + 1) if math.comb(n, k) <= observed) / 2**n
    assert compare_module().sign_test(ahead, behind) == pytest.approx(min(1.0, expected))


def test_sign_test_known_values() -> None:
    sign_test = compare_module().sign_test
    assert sign_test(5, 0) == pytest.approx(0.0625)
    assert sign_test(4, 1) == pytest.approx(0.375)
    assert sign_test(12, 2) == pytest.approx(0.01294, abs=1e-5)
    assert sign_test(0, 0) == 1.0


def test_measure_per_market() -> None:
    measure_of = compare_module().measure_of
    assert measure_of(run("meanrev", 1, 2.0, 4.0)) == ("agent/oracle", 0.5, True)
    assert measure_of(run("randomwalk", 1, 3.0, 0.0, round_trips=7)) == ("round trips", 7.0, False)
    assert measure_of(run("eurusd", 1, -0.5, None)) == ("agent Sharpe", -0.5, True)


def test_pairs_by_seed_and_counts_the_better_direction() -> None:
    module = compare_module()
    base = {("meanrev", s): run("meanrev", s, r, 1.0) for s, r in [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)]}
    base |= {("randomwalk", s): run("randomwalk", s, 0.0, 0.0, round_trips=t) for s, t in [(1, 100), (2, 50)]}
    candidate = {("meanrev", s): run("meanrev", s, r, 1.0) for s, r in [(1, 0.5), (2, 0.1), (3, 0.3), (9, 2.0)]}
    candidate |= {("randomwalk", s): run("randomwalk", s, 0.0, 0.0, round_trips=t) for s, t in [(1, 10), (2, 20)]}
    meanrev, walk = module.compare(base, candidate)
    # seed 4 has no candidate run and seed 9 no base run: only seeds 1-3 pair
    assert meanrev["seeds"] == [1, 2, 3]
    assert (meanrev["ahead"], meanrev["behind"], meanrev["equal"]) == (1, 1, 1)
    assert meanrev["base"] == pytest.approx(0.2) and meanrev["candidate"] == pytest.approx(0.3)
    assert meanrev["difference"] == pytest.approx(0.0)
    # fewer round trips on the random walk is the candidate ahead
    assert walk["measure"] == "round trips" and (walk["ahead"], walk["behind"]) == (2, 0)
    assert walk["difference"] == pytest.approx(-60.0)


def test_refuses_a_repeated_seed_and_names_the_files(tmp_path: Path) -> None:
    module = compare_module()
    first = write(tmp_path / "a.json", [run("trend", 3, 1.0, 2.0)])
    second = write(tmp_path / "b.json", [run("trend", 3, 1.5, 2.0)])
    with pytest.raises(SystemExit, match=r"b\.json: run 0 repeats dataset 'trend' seed 3, already read from .*a\.json"):
        module.load_runs([first, second])


def test_variant_picks_one_ablation_row(tmp_path: Path) -> None:
    module = compare_module()
    path = write(tmp_path / "ablation.json", [run("trend", 3, 1.0, 2.0, variant="off"),
                                              run("trend", 3, 1.5, 2.0, variant="on")])
    with pytest.raises(SystemExit, match="--base-variant"):
        module.load_runs([path])
    assert module.load_runs([path], "on")["trend", 3]["agent"]["sharpe"] == 1.5


def test_not_a_results_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SystemExit, match="bad.json: no 'runs' list"):
        compare_module().load_runs([bad])


def test_script_prints_the_paired_table(tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", [run("meanrev", s, 0.1 * s, 1.0) for s in range(13, 18)])
    candidate = write(tmp_path / "candidate.json", [run("meanrev", s, 0.1 * s + 0.5, 1.0) for s in range(13, 18)])
    result = subprocess.run([sys.executable, str(SCRIPT), "--base", str(base), "--candidate", str(candidate)],
                            capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| dataset | measure | seeds |")
    assert lines[2] == "| meanrev | agent/oracle | 13-17 | +1.50 | +2.00 | +0.50 | 5 | 0 | 0 | 0.06 |"


def test_a_row_keeps_one_measure() -> None:
    module = compare_module()
    # seed 3's oracle lost on its windows: a round-trip count, not a ratio, and left out of the ratio row
    base = {("meanrev", s): run("meanrev", s, 1.0, 2.0 if s != 3 else -1.0, round_trips=500) for s in (1, 2, 3)}
    candidate = {("meanrev", s): run("meanrev", s, 1.5, 2.0 if s != 3 else -1.0, round_trips=5) for s in (1, 2, 3)}
    (row,) = module.compare(base, candidate)
    assert row["measure"] == "agent/oracle" and row["seeds"] == [1, 2]
    assert (row["ahead"], row["behind"]) == (2, 0) and row["difference"] == pytest.approx(0.25)


def test_per_seed_lists_each_pair_in_seed_order(tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", [run("randomwalk", 14, 0.0, 0.0, round_trips=80),
                                          run("randomwalk", 13, 0.0, 0.0, round_trips=120),
                                          run("trend", 13, -0.5, 2.0)])
    candidate = write(tmp_path / "candidate.json", [run("randomwalk", 13, 0.0, 0.0, round_trips=20),
                                                    run("randomwalk", 14, 0.0, 0.0, round_trips=90),
                                                    run("trend", 13, 1.0, 2.0)])
    result = subprocess.run([sys.executable, str(SCRIPT), "--base", str(base), "--candidate", str(candidate),
                             "--per-seed"], capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    start = lines.index("| dataset | measure | seeds | base, per seed | candidate, per seed |")
    assert lines[start + 2:] == ["| randomwalk | round trips | 13, 14 | 120, 80 | 20, 90 |",
                                 "| trend | agent/oracle | 13 | -0.25 | +0.50 |"]
    # without the flag the second table is left out
    plain = subprocess.run([sys.executable, str(SCRIPT), "--base", str(base), "--candidate", str(candidate)],
                           capture_output=True, text=True, check=True)
    assert "per seed" not in plain.stdout


def test_runs_of_two_machines_are_paired_with_a_warning_naming_both(tmp_path: Path) -> None:
    runs = [run("trend", s, 1.0, 2.0) for s in (13, 14)]
    base = write(tmp_path / "base.json", runs, "AMD EPYC; torch 2.13.0+cpu")
    same = write(tmp_path / "same.json", runs, "AMD EPYC; torch 2.13.0+cpu")
    other = write(tmp_path / "other.json", runs, "Intel Xeon; NVIDIA H100 80GB HBM3; torch 2.11.0")
    quiet = subprocess.run([sys.executable, str(SCRIPT), "--base", str(base), "--candidate", str(same)],
                           capture_output=True, text=True, check=True)
    assert quiet.stderr == ""
    warned = subprocess.run([sys.executable, str(SCRIPT), "--base", str(base), "--candidate", str(other)],
                            capture_output=True, text=True, check=True)
    assert warned.stderr.startswith("warning: the base ran on AMD EPYC; torch 2.13.0+cpu, the candidate on "
                                    "Intel Xeon; NVIDIA H100 80GB HBM3; torch 2.11.0:")
    assert warned.stdout == quiet.stdout  # the table itself is the same
    unrecorded = write(tmp_path / "old.json", runs)
    older = subprocess.run([sys.executable, str(SCRIPT), "--base", str(unrecorded), "--candidate", str(same)],
                           capture_output=True, text=True, check=True)
    assert "the base ran on not recorded" in older.stderr


def test_learning_records_the_machine_it_ran_on() -> None:
    import torch

    parts = load_script("learning").machine().split("; ")
    assert parts[-1] == f"torch {torch.__version__}"
    assert len(parts) == (3 if torch.cuda.is_available() else 2)  # CPU, [the GPU torch sees,] torch
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
              if line.startswith("model name")] if cpuinfo.exists() else []
    if models:  # Linux names its CPU model there, and that is the name recorded
        assert parts[0] == models[0]
    assert parts[0]
