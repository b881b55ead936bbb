"""``foxhunt sweep``: a config over seeds x folds (x variants) as independent trials (``foxhunt.sweep``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import attrs
import click
from rich.console import Console
from rich.table import Table

from foxhunt.cli.common import EXIT_STOPPED, config_options, toml_string
from foxhunt.errors import ConfigError

__all__ = ["sweep_command"]

console = Console()
EXECUTORS = ("local", "ray")


def _summary_table(data: dict) -> Table:
    table = Table("variant", "complete", "test Sharpe, mean [95% CI]", "Sharpe − buy & hold, mean [95% CI]",
                  "net P&L − buy & hold, mean [95% CI]", "round trips, mean", title=f"sweep {data['sweep']}",
                  caption="means over each variant's complete trials (seeds × folds); intervals: bootstrap of the mean")
    for variant in data["variants"]:
        metrics = variant["metrics"]
        table.add_row(f"v{variant['variant']} {variant['label']}", f"{variant['complete']}/{variant['trials']}",
                      _mean_ci(metrics["sharpe"]["agent"]), _mean_ci(metrics["sharpe"]["minus_buy_and_hold"]),
                      _mean_ci(metrics["net_pnl"]["minus_buy_and_hold"], ",.0f"),
                      _mean_ci(metrics["round_trips"]["agent"], ".1f", interval=False))
    return table


def _mean_ci(stats: dict, spec: str = "+.2f", interval: bool = True) -> str:
    if not stats.get("n"):
        return "-"
    text = format(stats["mean"], spec)
    if interval:
        low, high = stats["ci95"]
        text += f" [{format(low, spec)}, {format(high, spec)}]"
    return text


def _executor(name: str, workers: int | None, ray_address: str | None, gpus: int):
    from foxhunt.sweep.local import LocalExecutor
    from foxhunt.sweep.ray_cluster import RayExecutor

    if name == "ray":
        return RayExecutor(address=ray_address, init_options={} if workers is None else {"num_cpus": workers})
    return LocalExecutor(workers=workers, gpus=gpus)


@click.command("sweep")
@config_options
@click.option("--data", "data_source", metavar="SOURCE", help="Data of every trial (as in `foxhunt train --data`).")
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Sweep file: seeds, folds, [grid] and [[variants]] (see below). Without it: every fold of the "
                   "config over --seeds seeds.")
@click.option("--seeds", type=click.IntRange(min=1), help="Seeds per variant (run.seed 0..N-1; overrides the sweep "
                                                         "file's seeds; default 4).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Sweep directory (default: a fresh timestamped folder under runs/sweep/).")
@click.option("--retry", "retry_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Run a sweep's failed and missing trials again and re-aggregate (uses the sweep's own plan).")
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
              help="local: trial processes on this machine; ray: Ray tasks on a local or existing Ray cluster.")
@click.option("--workers", type=click.IntRange(min=1),
              help="local: trials at a time (default: cores // threads, or the GPU count on CUDA); ray: the CPUs of "
                   "the local cluster it starts (default: all).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads per trial (default: the config's run.threads, "
                                                           "at least 1).")
@click.option("--ray-address", metavar="ADDRESS", help="Join an existing Ray cluster (e.g. 10.0.0.1:6379, or auto) "
                                                       "instead of starting a local one.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where trials train (default: the config's); on CUDA each trial takes one GPU.")
@click.option("--reports/--no-reports", default=True,
              help="Each trial builds its report.html (default: on; a few seconds of drawing per trial). A retry "
                   "keeps the sweep's choice.")
@click.option("--progress/--no-progress", default=True, help="A progress bar over the trials on a terminal.")
def sweep_command(config_path, overrides, data_source, spec_path, seeds, out_dir, retry_dir, executor, workers,
                  threads, ray_address, device, reports, progress) -> None:
    """Run a config over seeds x folds (x variants) as independent trials.

    \b
    Examples:
      foxhunt sweep --data eurusd-1h-2017 --seeds 4           # 4 seeds x every fold
      foxhunt sweep --spec lr.toml --out runs/sweep/lr        # a grid of variants
      foxhunt sweep --spec lr.toml --executor ray             # on a local Ray cluster
      foxhunt sweep --spec lr.toml --executor ray --ray-address 10.0.0.1:6379
      foxhunt sweep --retry runs/sweep/lr                     # failed and missing trials again
      foxhunt bands fit runs/sweep/lr --output bands.toml     # bands from the trials

    \b
    Sweep file (lr.toml):
      seeds = 4                      # run.seed 0..3 (first_seed = 0)
      folds = [0, 1, 2]              # optional; default every fold
      [grid]                         # every combination is a variant
      "learner.lr" = [1e-4, 3e-4]
      [[variants]]                   # optional named override sets
      name = "wide"
      set = { "learner.hidden" = [128, 128] }

    Each trial is an ordinary run directory (as `foxhunt train` writes)
    that trains and tests one fold of the walk-forward (folds.only), with
    its own seed; trials run in their own processes, so a crashed or killed
    trial is recorded (exit code, signal or Ray's error) and the others go
    on. The sweep directory holds plan.json, the trials, logs/, sweep.json
    (each metric per variant: mean, std, IQR and a bootstrap 95% interval of
    agent, agent minus buy-and-hold and agent minus flat) and sweep.html,
    which links every trial's report.html. See docs/sweep.md.

    \b
    Exit codes: 0 every trial complete; 2 an error in what was asked
    (config, sweep file, folder), one paragraph; 3 some trials failed or
    were interrupted (sweep.json says why; continue with --retry).
    """
    from foxhunt.config import dump_config, load_config
    from foxhunt.profiles import device_name
    from foxhunt.sweep.driver import pending_trials, run_pending, start_sweep
    from foxhunt.sweep.plan import read_plan
    from foxhunt.sweep.progress import SweepProgress
    from foxhunt.sweep.results import read_outcomes
    from foxhunt.sweep.spec import SweepSpec, check_spec, load_spec
    from foxhunt.trainer.run_dir import fresh_run_path

    if executor == "ray":
        from foxhunt.sweep.ray_cluster import import_ray

        if ray_address is not None and workers is not None:
            raise ConfigError("--workers sizes the local Ray cluster foxhunt starts; an existing cluster "
                              "(--ray-address) has the size its nodes gave it with `ray start`")
        import_ray()  # a missing Ray is one paragraph before the sweep directory is written
    elif ray_address is not None:
        raise ConfigError("--ray-address is for --executor ray")
    if retry_dir is not None:
        if config_path or overrides or data_source or spec_path or seeds or out_dir or device:
            raise ConfigError("--retry continues a sweep with its own plan; drop --config, --set, --data, --spec, "
                              "--seeds, --out and --device")
        directory = retry_dir
        plan = read_plan(directory)
    else:
        extra = list(overrides)
        if data_source is not None:
            extra.append(f"data.source={toml_string(data_source)}")
        if device is not None:  # before the run-size profile is resolved, as for `foxhunt train --device`
            extra.append(f"run.device={toml_string(device)}")
        resolved = load_config(config_path, extra)
        base = dump_config(resolved)
        spec = load_spec(spec_path) if spec_path is not None else SweepSpec()
        if seeds is not None:
            spec = attrs.evolve(spec, seeds=seeds)
        check_spec(spec, tomllib.loads(base), str(spec_path or "--seeds"))
        directory = out_dir if out_dir is not None else fresh_run_path(Path(resolved.train.out_dir) / "sweep")
        plan = start_sweep(directory, base, spec, reports=reports)
    config = plan.trial_config(plan.trials[0])
    trial_threads = threads or max(1, config.run.threads)
    gpus = _gpu_count() if device_name(plan.device) == "cuda" else 0
    runner = _executor(executor, workers, ray_address, gpus)
    pending = len(pending_trials(directory, plan, read_outcomes(directory)))
    console.print(f"sweep {directory}: {len(plan.trials)} trials, {pending} to run on {executor}")
    with SweepProgress(progress, pending) as bar:
        def on_trial(name, outcome) -> None:
            bar.trial_done(name, outcome.state)
            if outcome.state != "complete":
                console.print(f"trial {name} failed: {outcome.reason}")

        try:
            data = run_pending(directory, runner, threads=trial_threads, on_trial=on_trial)
        except KeyboardInterrupt:
            # the trial processes got the Ctrl-C too and stop at their epoch boundary; unrecorded, they are missing
            console.print(f"interrupted; finish the sweep with: foxhunt sweep --retry {directory}")
            click.get_current_context().exit(EXIT_STOPPED)
    console.print(_summary_table(data))
    console.print(f"sweep directory: {directory}\nreport: {Path(directory) / 'sweep.html'}")
    counts = data["counts"]
    if counts["failed"] or counts["missing"]:
        console.print(f"{counts['failed']} failed, {counts['missing']} missing; run them again with: "
                      f"foxhunt sweep --retry {directory}")
        click.get_current_context().exit(EXIT_STOPPED)


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()
