"""``foxhunt profile``: a run's training steps under torch.profiler, per-phase times, and a baseline check."""

from __future__ import annotations

from pathlib import Path

import click
import torch
from rich.console import Console
from rich.table import Table

from foxhunt.cli.common import EXIT_REGRESSED, config_options, resolve_config, toml_string
from foxhunt.config_checks import check_config
from foxhunt.profiling import (
    DEFAULT_THRESHOLD,
    Comparison,
    OpRow,
    ProfileOptions,
    ProfileResult,
    compare_profiles,
    load_profile,
    profile_run,
    save_profile,
)

__all__ = ["profile_command", "EXIT_REGRESSED"]

console = Console()


def _ms(microseconds: float) -> str:
    return f"{microseconds / 1000:,.3f}"


def _phase_table(result: ProfileResult) -> Table:
    table = Table("phase", "calls", "total s", "ms per call", title="phases (wall clock, device synchronised)")
    for name, time in result.profile.phases.items():
        table.add_row(name, str(time.calls), f"{time.seconds:.4f}", f"{time.per_call * 1000:,.3f}")
    return table


def _op_table(title: str, rows: tuple[OpRow, ...], device: bool) -> Table:
    columns = ["op / range", "calls", "self CPU ms", "CPU total ms"] + (["self device ms"] if device else [])
    table = Table(*columns, title=title)
    for row in rows:
        cells = [row.name, str(row.calls), _ms(row.self_cpu_us), _ms(row.cpu_us)]
        table.add_row(*cells, *([_ms(row.self_device_us)] if device else []))
    return table


def _comparison_table(comparison: Comparison, baseline: Path) -> Table:
    table = Table("phase", "baseline ms per call", "now ms per call", "change", "verdict",
                  title=f"against {baseline} (a regression: {comparison.threshold:.0%} slower or more)")
    for change in comparison.changes:
        verdict = "[red]REGRESSED[/red]" if change.regressed else "ok"
        table.add_row(change.phase, f"{change.baseline * 1000:,.3f}", f"{change.current * 1000:,.3f}",
                      f"{change.ratio - 1:+.1%}", verdict)
    return table


@click.command("profile")
@config_options
@click.option("--data", "data_source", metavar="SOURCE", help="Data source, as for `foxhunt train --data`.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where to train (default: auto); a CUDA run records CUDA kernels too.")
@click.option("--steps", type=click.IntRange(min=1), default=ProfileOptions().steps, show_default=True,
              help="Training steps profiled (each: one vector step of collection and the plan's updates).")
@click.option("--warmup", type=click.IntRange(min=0), default=ProfileOptions().warmup, show_default=True,
              help="Steps with updates run first, unmeasured (compilation, CUDA graph capture).")
@click.option("--boundaries", type=click.IntRange(min=1), default=ProfileOptions().boundaries, show_default=True,
              help="Epoch boundaries profiled (each: the validation backtest and the checkpoint writes).")
@click.option("--trace", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the Chrome trace here (open it in chrome://tracing or https://ui.perfetto.dev).")
@click.option("--top", type=click.IntRange(min=1), default=ProfileOptions().top, show_default=True,
              help="Rows of each op table.")
@click.option("--save-baseline", type=click.Path(dir_okay=False, path_type=Path),
              help="Record the per-phase times, with the machine and device, as JSON here.")
@click.option("--baseline", type=click.Path(dir_okay=False, path_type=Path),
              help="Compare the per-phase times with a file --save-baseline wrote; exit 4 when a phase regressed.")
@click.option("--threshold", type=click.FloatRange(min=0), default=DEFAULT_THRESHOLD, show_default=True,
              help="With --baseline: the slowdown, as a fraction, that counts as a regression (0.2: 20%).")
def profile_command(config_path, overrides, data_source, device, steps, warmup, boundaries, trace, top, save_baseline,
                    baseline, threshold) -> None:
    """Profile the configured run's training steps and epoch boundaries.

    Builds the run as `foxhunt train` would (same --config, --set, --data,
    --device) in a temporary run directory, warms up, then runs --steps
    training steps and --boundaries epoch boundaries of its first fold under
    torch.profiler. Prints the time of each phase (collect, update,
    validation, checkpoint), the top host ops and ranges by self CPU time
    and, on CUDA, the top kernels by device time. docs/profiling.md explains
    the phases.

    \b
    Examples:
      foxhunt profile --trace trace.json
      foxhunt profile --device cuda --steps 200 --save-baseline baseline.json
      foxhunt profile --device cuda --steps 200 --baseline baseline.json

    \b
    Exit codes: 0 done (no phase regressed); 2 an error in what was asked
    (config, data, a baseline file that is not one), printed as one
    paragraph; 4 a phase regressed against --baseline by --threshold or
    more.
    """
    extra = list(overrides)
    if data_source is not None:
        extra.append(f"data.source={toml_string(data_source)}")
    if device is not None:
        extra.append(f"run.device={toml_string(device)}")
    config = check_config(resolve_config(config_path, tuple(extra)))
    recorded = load_profile(baseline) if baseline is not None else None  # a bad file fails before the run
    if config.run.threads:
        torch.set_num_threads(config.run.threads)  # the program, not the library, sizes the thread pool
    options = ProfileOptions(steps=steps, warmup=warmup, boundaries=boundaries, top=top, trace=trace)
    result = profile_run(config, options)
    console.print(_phase_table(result))
    console.print(_op_table("host: ops and foxhunt ranges by self CPU time", result.host, bool(result.device)))
    if result.device:
        console.print(_op_table("device: kernels by self device time", result.device, True))
    if trace is not None:
        console.print(f"Chrome trace: {trace}")
    if save_baseline is not None:
        save_profile(save_baseline, result.profile)
        console.print(f"baseline written: {save_baseline}")
    if recorded is None:
        return
    comparison = compare_profiles(recorded, result.profile, threshold)
    console.print(_comparison_table(comparison, baseline))
    for key, before, now in comparison.machine_differences:
        console.print(f"note: the baseline's machine differs in {key}: {before!r}, now {now!r}")
    if comparison.unmatched:
        console.print(f"not compared (timed on one side only): {', '.join(comparison.unmatched)}")
    if comparison.regressed:
        names = ", ".join(f"{c.phase} ({c.ratio - 1:+.0%})" for c in comparison.regressions)
        console.print(f"[red]regressed against {baseline}: {names}[/red]")
        click.get_current_context().exit(EXIT_REGRESSED)

