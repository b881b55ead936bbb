"""``foxhunt train``, ``backtest``, ``report`` and ``datasets``: the commands that do the work."""

from __future__ import annotations

from pathlib import Path

import attrs
import click
import torch
from rich.console import Console
from rich.table import Table

from foxhunt.checkpoint_backtest import CHECKPOINT_WINDOWS, backtest_checkpoint, plugin_overrides
from foxhunt.cli.common import (EXIT_OUT_OF_BAND, EXIT_STOPPED, config_options, metrics_port_option, resolve_config,
                                 toml_string)
from foxhunt.config_checks import check_config
from foxhunt.data import list_datasets
from foxhunt.errors import BandStop, ConfigError, FoxhuntError, NumericalFault
from foxhunt.trainer.bands import load_bands
from foxhunt.trainer.distributed import train_on_devices
from foxhunt.trainer.interrupt import StopFlag
from foxhunt.trainer.report import build_report
from foxhunt.trainer.resume import resume_config
from foxhunt.trainer.run_dir import BacktestDirectory, RunDirectory, fresh_run_path
from foxhunt.trainer.trainer import Trainer

__all__ = ["train_command", "backtest_command", "report_command", "datasets_group"]

console = Console()


# Under every results table: what the two activity counts mean (the report carries the same words).
COUNTS_CAPTION = ("fills: bars on which an order filled; round trips: positions closed or reversed "
                  "(an open position is not one yet). turnover: notional traded / initial cash")


def _count(value: object) -> str:
    # A run resumed from a checkpoint written before fills were counted has no overall fills figure.
    return str(int(value)) if isinstance(value, (int, float)) else "n/a"


def _results_table(title: str, rows: dict[str, dict[str, float]]) -> Table:
    table = Table("policy", "net P&L", "Sharpe", "Sortino", "max DD", "turnover", "fills", "round trips", title=title,
                  caption=COUNTS_CAPTION)
    for policy, m in rows.items():
        table.add_row(
            policy.replace("_", " "), f"{m['net_pnl']:+,.2f}", f"{m['sharpe']:+.2f}", f"{m['sortino']:+.2f}",
            f"{m['max_drawdown']:.2%}", f"{m['turnover']:.2f}", _count(m.get("fills")), _count(m.get("round_trips")),
        )
    return table


@click.command("train")
@config_options
@click.option("--data", "data_source", metavar="SOURCE",
              help="Bundled dataset name (`foxhunt datasets list`), a synthetic spec such as "
                   "'synthetic:planted?bars=4000&seed=1', or a CSV / Parquet / DBN path. Default: eurusd-1h-2017.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory (default: a fresh timestamped folder under runs/).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where to train (default: auto). The device picks the run-size profile: see `foxhunt config show`.")
@click.option("--seed", type=click.IntRange(min=0), help="Random seed; the same seed on the CPU gives identical results.")
@click.option("--devices", type=click.IntRange(min=1),
              help="Worker processes of this run (sets run.devices; default 1): N > 1 trains data-parallel on "
                   "cuda:0..N-1, or on N CPU processes (docs/multi-device.md). A resumed run may change it.")
@click.option("--resume", "resume_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Continue a stopped or killed run from its run directory (uses that run's config).")
@click.option("--bands", "bands_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Regression bands (`foxhunt bands fit`): stop the run when a metric stays out of its band for "
                   "the file's patience (sets run.bands; docs/bands.md).")
@metrics_port_option
@click.option("--progress/--no-progress", default=True, help="Progress bars on a terminal (default: on).")
def train_command(config_path, overrides, data_source, out_dir, device, seed, devices, resume_dir, bands_file,
                  metrics_port, progress) -> None:
    """Train an agent with walk-forward folds and write a run directory.

    \b
    Examples:
      foxhunt train                                  # bundled EUR/USD hourly, a few minutes on a CPU
      foxhunt train --data sp500-1d-1999-2018 --seed 3
      foxhunt train --data prices.csv --set data.instrument=ES --set train.epochs=8
      foxhunt train --resume runs/20261130-081500    # after Ctrl-C
      foxhunt train --device cuda                    # GPU-sized run: 4096 envs, 1M transitions/epoch, CUDA graphs

    \b
    Sizes follow the device ([run] profile = "auto"): a CUDA run gets
    thousands of environments and 80x the CPU run's transitions per epoch,
    batches of 1024, the step compiled and replayed as CUDA graphs; a CPU run
    gets small sizes. Anything you set yourself wins. Training length is counted in env
    transitions and learner updates per epoch (train.env_steps_per_epoch,
    train.updates_per_epoch), so changing env.n_envs does not change how much
    the agent learns. See the resolved values with
    `foxhunt config show --set run.device=cuda`.

    Each fold trains, picks its best epoch on a validation window, and backtests
    that policy once on a later test window; the test figures are the result.
    The run directory holds config.toml, plugins.json, metrics.jsonl,
    checkpoints/, equity/, summary.json and report.html. --out must be a new
    or empty folder (or a run that never finished an epoch); a folder of
    other files is refused. A resume checkpoint is written at every epoch
    boundary: after a crash or a kill, --resume loses at most one epoch.
    Ctrl-C stops at the end of the current epoch.

    \b
    Exit codes: 0 the run finished; 2 an error in what was asked (config,
    data, folder, checkpoint), printed as one paragraph; 3 stopped early on
    Ctrl-C or SIGTERM (continue with --resume); 4 stopped by --bands: a metric
    left its regression band (summary.json and report.html say which).
    """
    if resume_dir is not None:
        if config_path is not None or overrides or data_source is not None or bands_file is not None:
            raise ConfigError("--resume continues a run with its own config.toml; drop --config, --set, --data and "
                              "--bands")
        # Locked first; a finished run, a foreign folder or a changed config is refused before anything is built
        run_dir = RunDirectory(resume_dir, resume=True)
        try:
            config = resume_config(resume_dir, device)
            if devices is not None:  # run.devices may change on resume: N devices -> M (docs/multi-device.md)
                config = attrs.evolve(config, run=attrs.evolve(config.run, devices=devices))
            config = check_config(config)
        except BaseException:
            run_dir.release()
            raise
    else:
        extra = list(overrides)
        if data_source is not None:
            extra.append(f"data.source={toml_string(data_source)}")
        if seed is not None:
            extra.append(f"run.seed={seed}")
        if bands_file is not None:  # absolute: config.toml keeps it, and --resume may run from another folder
            extra.append(f"run.bands={toml_string(str(bands_file.absolute()))}")
        if devices is not None:
            extra.append(f"run.devices={devices}")
        if device is not None:  # before the profile is resolved: --device cuda gets the GPU-sized defaults
            extra.append(f"run.device={toml_string(device)}")
        config = check_config(resolve_config(config_path, tuple(extra)))  # before the run directory exists
        if config.run.bands is not None:
            load_bands(Path(config.run.bands))  # a missing or malformed bands file, before any data is loaded
        path = out_dir if out_dir is not None else fresh_run_path(Path(config.train.out_dir))
        run_dir = RunDirectory(path)
    if config.run.threads:
        torch.set_num_threads(config.run.threads)  # the program, not the library, sizes the thread pool
    with StopFlag() as stop:
        try:
            if config.run.devices > 1:  # N ranks; each takes its own stop requests (Ctrl-C reaches them all)
                summary = train_on_devices(config, run_dir, resume=resume_dir is not None, show_progress=progress,
                                           metrics_port=metrics_port)
            else:
                trainer = Trainer(config, run_dir, stop=stop, show_progress=progress, metrics_port=metrics_port)
                summary = trainer.run(resume_from=resume_dir)
        except NumericalFault:
            build_report(run_dir.path)  # the report names the fault, as summary.json does
            raise
        except BandStop as stop_reason:
            build_report(run_dir.path)  # the report names the metric and its band, as summary.json does
            click.secho(f"error: {stop_reason}", fg="red", err=True)
            click.get_current_context().exit(EXIT_OUT_OF_BAND)
        except FoxhuntError:
            if resume_dir is None:
                run_dir.discard_if_unstarted()  # a run that failed before training leaves no folder behind
            raise
        finally:
            run_dir.release()
    if summary is None:
        console.print(f"stopped early; continue with: foxhunt train --resume {run_dir.path}")
        click.get_current_context().exit(EXIT_STOPPED)
    report = build_report(run_dir.path)
    console.print(_results_table(
        f"TEST (out of sample: each fold's chosen policy on its test window), all folds ({config.data.source})",
        summary["overall"],
    ))
    console.print(_results_table(
        "validation (the window each fold's best epoch was chosen on: optimistic, not out of sample)",
        summary["validation_overall"],
    ))
    console.print(f"run directory: {run_dir.path}\nreport: {report}")



@click.command("backtest")
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--data", "data_source", metavar="SOURCE",
              help="Data to evaluate on (default: the checkpoint's own data; other data is evaluated on every bar "
                   "after the feature warm-up).")
@click.option("--window", type=click.Choice(CHECKPOINT_WINDOWS), default="test", show_default=True,
              help="Which window of the checkpoint's own data: its fold's test window (out of sample, what "
                   "summary.json reports) or the validation window it was selected on.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write backtest.json and equity/fold_0.csv here: a new or empty folder, or one an earlier "
                   "backtest wrote (never a training run's folder).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@config_options
def backtest_command(checkpoint: Path, data_source: str | None, window: str, out_dir: Path | None, device: str,
                     config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Evaluate a fold checkpoint (RUN_DIR/checkpoints/fold_K) greedily, against buy-and-hold and flat.

    The run's config is the checkpoint's own; --config and --set may change
    only its [plugins] section, e.g. --set 'plugins.disable=["extra"]'. A
    checkpoint whose plugin set or ISV layout differs from the loaded one is
    refused naming the plugins and slots that differ and what to set; there is
    no migration. A checkpoint saved before folds had test windows has none:
    use --window validation or --data.
    """
    plugins = plugin_overrides(config_path, overrides)
    out = BacktestDirectory(out_dir) if out_dir is not None else None  # a training run's folder is refused up front
    outcome = backtest_checkpoint(checkpoint, data_source, device, window, plugins)
    title = f"backtest of {checkpoint} on {outcome.source}, {outcome.window_name} bars {outcome.window}"
    console.print(_results_table(title, outcome.metrics))
    if out is not None:
        out.write_json("backtest.json", {"checkpoint": str(checkpoint), "source": outcome.source,
                                         "window": list(outcome.window), "window_name": outcome.window_name,
                                         "metrics": outcome.metrics})
        stamps = outcome.timestamps[: len(outcome.curves["agent"])]
        out.write_equity(0, stamps, outcome.curves)
        console.print(f"wrote {out.path / 'backtest.json'}")


@click.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report_command(run_dir: Path) -> None:
    """Rebuild RUN_DIR/report.html (self-contained: opens in a browser with no network)."""
    console.print(f"wrote {build_report(run_dir)}")


@click.group("datasets")
def datasets_group() -> None:
    """Data sources foxhunt knows by name."""


@datasets_group.command("list")
def datasets_list() -> None:
    """List bundled datasets and synthetic generators (use the name with `foxhunt train --data`)."""
    table = Table("name", "kind", "bars", "from", "to", "bar", "instrument", "description", title="foxhunt datasets")
    for info in list_datasets():
        table.add_row(info.name, info.kind, str(info.bars), info.start, info.end, info.bar_frequency, info.instrument, info.description)
    console.print(table)
