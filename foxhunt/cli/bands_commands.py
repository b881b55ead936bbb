"""``foxhunt bands fit``: regression bands fitted on good runs (docs/bands.md)."""

from __future__ import annotations

from pathlib import Path

import click

from foxhunt.trainer.bands import fit_bands, run_directories, write_bands

__all__ = ["bands_group"]


@click.group("bands")
def bands_group() -> None:
    """Regression bands: per-epoch metric ranges of good runs, checked by `foxhunt train --bands`."""


@bands_group.command("fit")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The bands file to write (TOML).")
@click.option("--k", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True,
              help="Band half-width in standard deviations over the runs.")
@click.option("--patience", type=click.IntRange(min=1), default=2, show_default=True,
              help="Consecutive out-of-band epochs that stop a run (a NaN or infinity stops it at once).")
@click.option("--metrics", "metrics", multiple=True, metavar="NAME",
              help="Band only these metrics: a name such as validation.sharpe, or a section such as losses "
                   "(repeatable; default: every banded metric).")
@click.option("--relative-floor", type=click.FloatRange(min=0), default=0.01, show_default=True,
              help="The standard deviation is at least this fraction of |mean| (identical runs get a band too).")
@click.option("--absolute-floor", type=click.FloatRange(min=0), default=1e-6, show_default=True,
              help="... and at least this much.")
def bands_fit(runs: tuple[Path, ...], output: Path, k: float, patience: int, metrics: tuple[str, ...],
              relative_floor: float, absolute_floor: float) -> None:
    """Fit bands on RUNS (run directories, or folders of run directories such as a sweep) and write them.

    \b
    Every (fold, epoch) that all runs reached gets, per metric, the mean over
    runs and sigma = max(std over runs, relative floor x |mean|, absolute
    floor); the band is mean -/+ k x sigma. Use the runs of one config.

    \b
    Example:
      foxhunt bands fit runs/seed0 runs/seed1 runs/seed2 --output bands.toml
      foxhunt train --seed 3 --bands bands.toml
    """
    directories = run_directories(runs)
    bands = fit_bands(directories, k=k, patience=patience, metrics=metrics, relative_floor=relative_floor,
                      absolute_floor=absolute_floor)
    write_bands(output, bands)
    click.echo(f"wrote {output}: {len(bands.metrics)} metrics x {len(bands.epochs)} epochs from "
               f"{len(directories)} runs ({', '.join(map(str, directories))})")
