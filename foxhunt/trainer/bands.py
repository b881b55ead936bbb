"""Regression bands: per-epoch ranges of a run's metrics, fitted on good runs, kept in a TOML file.

A band is fitted for every (fold, epoch) and metric of ``metrics.jsonl``: the
mean over the given runs, plus or minus ``k`` standard deviations (the sample
standard deviation over runs). A metric identical in every run would get a
band of width zero, which float noise alone would leave, so the deviation has
a floor::

    sigma = max(sample std over runs, relative_floor * |mean|, absolute_floor)

The file stores ``mean`` and that floored ``sigma`` per metric, and ``k``
once: a band is ``mean - k * sigma .. mean + k * sigma``, so raising ``k`` in
the file widens every band. ``patience`` (how many consecutive out-of-band
epochs stop a run) is stored too. docs/bands.md is the user's page;
:mod:`foxhunt.trainer.band_watch` checks a run against the file.

Metric names are the dotted paths of a ``metrics.jsonl`` line: ``losses.c51``,
``grad_norms.c51``, ``grad_norms_clipped.c51``, ``safety_clips``,
``adaptive.tau.value`` (a slot of several lanes gives ``adaptive.gamma.branch[0]``
and so on) and ``validation.sharpe``. Timings and action counts are not
banded: they measure the machine, or they are counts of a policy's choices.
"""

from __future__ import annotations

import math
import statistics
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import tomli_w

from foxhunt import durable
from foxhunt.config_loading import load_toml, structure, unstructure
from foxhunt.errors import ConfigError, FoxhuntError
from foxhunt.trainer.report import read_metrics

__all__ = [
    "BANDS_VERSION",
    "BANDED_SECTIONS",
    "EpochBands",
    "BandsFile",
    "flatten_metrics",
    "run_directories",
    "fit_bands",
    "load_bands",
    "write_bands",
]

BANDS_VERSION = 1
# Sections of a metrics.jsonl line that are banded: tables of numbers (a list is one metric per lane) and numbers.
BANDED_SECTIONS = ("losses", "grad_norms", "grad_norms_clipped", "safety_clips", "adaptive", "validation")
METRICS_FILE = "metrics.jsonl"


def _positive(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"'{attribute.name}' must be a positive finite number: {value!r}", attribute, None, value)


def _non_negative(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"'{attribute.name}' must be a finite number >= 0: {value!r}", attribute, None, value)


def _finite_values(instance: Any, attribute: attrs.Attribute, value: Mapping[str, float]) -> None:
    bad = [name for name, number in value.items() if not math.isfinite(number)]
    if bad:
        raise ValueError(f"'{attribute.name}' must hold finite numbers; not finite: {', '.join(bad)}", attribute,
                         None, value)


@attrs.frozen
class EpochBands:
    """The bands of one (fold, epoch): per metric its mean and floored standard deviation over the fitted runs."""

    fold: int = attrs.field(validator=attrs.validators.ge(0))
    epoch: int = attrs.field(validator=attrs.validators.ge(0))
    mean: dict[str, float] = attrs.field(validator=_finite_values)
    sigma: dict[str, float] = attrs.field(validator=_finite_values)

    def band(self, metric: str, k: float) -> tuple[float, float]:
        """``(low, high)``: ``mean -/+ k * sigma``."""
        return self.mean[metric] - k * self.sigma[metric], self.mean[metric] + k * self.sigma[metric]


@attrs.frozen
class BandsFile:
    """A bands file: its format version, the band rule, the metric names and one :class:`EpochBands` per epoch."""

    version: int = attrs.field(validator=attrs.validators.in_((BANDS_VERSION,)))
    k: float = attrs.field(validator=_positive)
    patience: int = attrs.field(validator=attrs.validators.ge(1))
    relative_floor: float = attrs.field(validator=_non_negative)
    absolute_floor: float = attrs.field(validator=_non_negative)
    metrics: list[str]
    runs: list[str]
    epochs: list[EpochBands]

    def at(self, fold: int, epoch: int) -> EpochBands | None:
        """The bands of ``(fold, epoch)``, or ``None`` when the file has none (a longer run than the fitted ones)."""
        return self._by_position.get((fold, epoch))

    @property
    def _by_position(self) -> dict[tuple[int, int], EpochBands]:
        return {(bands.fold, bands.epoch): bands for bands in self.epochs}


def flatten_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The banded metrics of one ``metrics.jsonl`` line, by dotted name (module docstring)."""
    flat: dict[str, float] = {}
    for section in BANDED_SECTIONS:
        value = row.get(section)
        if isinstance(value, Mapping):
            for key, item in value.items():
                _flatten_into(flat, f"{section}.{key}", item)
        else:
            _flatten_into(flat, section, value)
    return flat


def _flatten_into(flat: dict[str, float], name: str, value: Any) -> None:
    if isinstance(value, list):
        for lane, item in enumerate(value):
            if _is_number(item):
                flat[f"{name}[{lane}]"] = float(item)
    elif _is_number(value):
        flat[name] = float(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def run_directories(paths: Iterable[Path]) -> list[Path]:
    """Each path as a run directory (it holds ``metrics.jsonl``), or, for a sweep folder, its runs: the
    subfolders that hold one. A path that is neither is a :class:`FoxhuntError` naming it."""
    runs: list[Path] = []
    for path in map(Path, paths):
        if (path / METRICS_FILE).is_file():
            runs.append(path)
            continue
        found = sorted(child for child in path.iterdir() if (child / METRICS_FILE).is_file()) if path.is_dir() else []
        if not found:
            raise FoxhuntError(f"{path}: neither a run directory (no {METRICS_FILE}) nor a folder of run directories; "
                               "give the folders `foxhunt train` wrote, or a sweep folder holding them")
        runs.extend(found)
    return runs


def _epoch_values(run: Path, names: Sequence[str] | None) -> tuple[dict[tuple[int, int], dict[str, float]], list[str]]:
    """Per (fold, epoch) the run's banded metrics; every line must have every metric of ``names``
    (by default the first line's)."""
    path = run / METRICS_FILE
    by_epoch: dict[tuple[int, int], dict[str, float]] = {}
    for number, row in enumerate(read_metrics(run), start=1):
        fold, epoch = row.get("fold"), row.get("epoch")
        if type(fold) is not int or type(epoch) is not int:
            raise FoxhuntError(f"{path}: line {number}: no whole-number 'fold' and 'epoch'; the metrics file is damaged")
        if (fold, epoch) in by_epoch:
            raise FoxhuntError(f"{path}: line {number}: fold {fold}, epoch {epoch} appears twice; the metrics file "
                               "is damaged (a run writes each epoch once)")
        flat = flatten_metrics(row)
        names = list(flat) if names is None else names
        missing = [name for name in names if name not in flat]
        if missing:
            raise FoxhuntError(f"{path}: line {number}: no metric {', '.join(missing)}; the runs of one bands file "
                               "must share their config (the same loss components and plugins), and --metrics must "
                               "name metrics of metrics.jsonl (docs/bands.md lists them)")
        bad = [name for name in names if not math.isfinite(flat[name])]
        if bad:
            raise FoxhuntError(f"{path}: line {number}: not finite: {', '.join(bad)}; a run with NaN or infinity "
                               "is not a good run to fit bands on")
        by_epoch[(fold, epoch)] = {name: flat[name] for name in names}
    if not by_epoch:
        raise FoxhuntError(f"{path}: holds no epoch; fit bands on runs that finished epochs")
    return by_epoch, list(names or [])


def _selected(available: Sequence[str], wanted: Sequence[str], source: Path) -> list[str]:
    """The metrics named in ``wanted``: a full name, or a section (``validation``) for all of its metrics."""
    chosen: list[str] = []
    for name in wanted:
        matches = [m for m in available if m == name or m.startswith(name + ".") or m.startswith(name + "[")]
        if not matches:
            raise FoxhuntError(f"{source / METRICS_FILE}: no metric {name!r} (--metrics); its metrics are "
                               f"{', '.join(available)}")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def _only_fold(run: Path) -> int | None:
    """The one fold a run trained (``folds.only`` in its ``config.toml``), or None for every fold."""
    try:
        only = tomllib.loads((run / "config.toml").read_text(encoding="utf-8")).get("folds", {}).get("only")
    except (OSError, ValueError):
        return None  # no readable config: the run's metrics say which folds it reached
    return only if isinstance(only, int) else None


def fit_bands(runs: Sequence[Path], *, k: float = 3.0, patience: int = 2, metrics: Sequence[str] = (),
              relative_floor: float = 0.01, absolute_floor: float = 1e-6) -> BandsFile:
    """Bands over ``runs`` (run directories) for every (fold, epoch) all of them reached; a run of one fold
    (``folds.only``, as each trial of ``foxhunt sweep`` is) counts only for its fold, so the trials of a sweep
    give each fold's bands over their seeds.

    ``metrics``: metric names or section names (default: every banded metric of the first run's first line).
    """
    if len(runs) < 2:
        raise FoxhuntError(f"bands need at least two runs to measure their spread; got {len(runs)}: "
                           f"{', '.join(map(str, runs)) or 'none'}")
    first, names = _epoch_values(runs[0], None)
    if metrics:
        names = _selected(names, metrics, runs[0])
        first = {position: {n: values[n] for n in names} for position, values in first.items()}
    per_run = [first] + [_epoch_values(run, names)[0] for run in runs[1:]]
    only = [_only_fold(run) for run in runs]
    shared = []
    for fold, epoch in sorted(set().union(*per_run)):
        # a run of one fold (folds.only, a sweep's trial) stands for that fold alone
        members = [values for values, trained in zip(per_run, only) if trained in (None, fold)]
        if len(members) >= 2 and all((fold, epoch) in values for values in members):
            shared.append(((fold, epoch), members))
    if not shared:
        raise FoxhuntError(f"the runs share no (fold, epoch): {', '.join(map(str, runs))}; fit bands on runs of "
                           "one config (at least two runs of each fold)")
    epochs = []
    for (fold, epoch), members in shared:
        mean, sigma = {}, {}
        for name in names:
            values = [run_values[(fold, epoch)][name] for run_values in members]
            mean[name] = statistics.fmean(values)
            sigma[name] = max(statistics.stdev(values), relative_floor * abs(mean[name]), absolute_floor)
        epochs.append(EpochBands(fold, epoch, mean, sigma))
    return BandsFile(BANDS_VERSION, float(k), patience, float(relative_floor), float(absolute_floor), list(names),
                     [str(run) for run in runs], epochs)


def load_bands(path: Path) -> BandsFile:
    """Read and check a bands file: syntax, keys, types and consistency, every problem naming the file and key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such bands file (run.bands, --bands); write one with `foxhunt bands fit`")
    bands = structure(load_toml(path), BandsFile, source=str(path))
    names = set(bands.metrics)
    for index, epoch in enumerate(bands.epochs):
        where = f"{path}: epochs[{index}] (fold {epoch.fold}, epoch {epoch.epoch})"
        for table in ("mean", "sigma"):
            values = getattr(epoch, table)
            if set(values) != names:
                extra, missing = sorted(set(values) - names), sorted(names - set(values))
                raise ConfigError(f"{where}.{table}: its metrics differ from the file's `metrics` list (missing: "
                                  f"{', '.join(missing) or 'none'}; not listed: {', '.join(extra) or 'none'}); "
                                  "fit the file again with `foxhunt bands fit`")
        negative = [name for name, value in epoch.sigma.items() if value < 0]
        if negative:
            raise ConfigError(f"{where}.sigma: {', '.join(negative)} is negative; a standard deviation is >= 0")
    if len(bands._by_position) != len(bands.epochs):
        raise ConfigError(f"{path}: epochs: one (fold, epoch) appears twice; each epoch has one table of bands")
    return bands


def write_bands(path: Path, bands: BandsFile) -> Path:
    """Write ``bands`` as TOML, atomically."""
    return durable.write_bytes(Path(path), tomli_w.dumps(unstructure(bands)).encode("utf-8"))
