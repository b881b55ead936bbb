"""A run checked against its regression bands at every epoch boundary (``foxhunt train --bands FILE``).

The trainer hands :meth:`BandWatch.check` each epoch's ``metrics.jsonl`` line
after the epoch's checkpoints are written. A metric outside its band for
``patience`` consecutive checked epochs (counted per metric, across fold
boundaries) is a :class:`Breach`, and the trainer stops the run with it the way a
numerical fault stops one. A banded metric that is NaN or infinite is a breach
at once, whatever the patience. Epochs beyond the file's (a run longer than the
fitted ones) are not checked, which is logged once. A file naming a metric this
run does not write is refused by :func:`open_band_watch` before training starts.
Bands and their file: :mod:`foxhunt.trainer.bands`; the user's page: docs/bands.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import structlog

from foxhunt.env.backtest import METRIC_KEYS
from foxhunt.errors import ConfigError
from foxhunt.isv import IsvLayout
from foxhunt.trainer.bands import BandsFile, flatten_metrics, load_bands

__all__ = ["Breach", "BandWatch", "open_band_watch", "run_metric_names"]

log = structlog.get_logger(__name__)

# learner.metrics() name prefix -> the metrics.jsonl section it is written under (metrics_row.epoch_metrics_row)
_LEARNER_SECTIONS = {"loss.": "losses.", "grad_norm.": "grad_norms.", "grad_norm_clipped.": "grad_norms_clipped."}
CORE_OWNER = "foxhunt"  # the core's own slots (train.*) are not written under "adaptive"


@attrs.frozen
class Breach:
    """Why a run stops: ``metric`` was outside ``[low, high]`` at each of ``epochs`` ((fold, epoch) pairs), last
    with ``value``; ``reason`` is ``"out of band"`` or ``"not finite"``."""

    file: str
    metric: str
    value: float
    low: float
    high: float
    fold: int
    epoch: int
    epochs: tuple[tuple[int, int], ...]
    patience: int
    reason: str

    @property
    def message(self) -> str:
        seen = ", ".join(f"fold {fold} epoch {epoch}" for fold, epoch in self.epochs)
        if self.reason == "not finite":
            what = f"{self.metric} is {self.value} (not finite) in fold {self.fold}, epoch {self.epoch}"
        else:
            what = (f"{self.metric} = {self.value:.10g} is outside its band [{self.low:.10g}, {self.high:.10g}] for "
                    f"{len(self.epochs)} consecutive epochs (patience {self.patience}: {seen})")
        return (f"{self.file}: {what}. The run is stopped: the checkpoints of this epoch are kept, and summary.json "
                "records the band. Compare the run with the runs the bands were fitted on (docs/bands.md)")

    def record(self) -> dict[str, Any]:
        """What ``summary.json`` keeps under ``bands`` (JSON: a non-finite value is written as its text)."""
        value = self.value if math.isfinite(self.value) else str(self.value)
        return {"file": self.file, "metric": self.metric, "value": value, "band": [self.low, self.high],
                "fold": self.fold, "epoch": self.epoch, "epochs": [list(e) for e in self.epochs],
                "patience": self.patience, "reason": self.reason, "message": self.message}


def run_metric_names(learner_metrics: Iterable[str], layout: IsvLayout) -> set[str]:
    """The banded metric names a run's ``metrics.jsonl`` lines hold (:func:`foxhunt.trainer.bands.flatten_metrics`),
    known once the run is built: from the learner's metric names, the ISV layout and the backtest's metrics."""
    names = {f"validation.{key}" for key in METRIC_KEYS}
    for name in learner_metrics:
        if name == "grad.safety_clips":
            names.add("safety_clips")
        for prefix, section in _LEARNER_SECTIONS.items():
            if name.startswith(prefix):
                names.add(section + name.removeprefix(prefix))
    for slot in layout.slots:
        if slot.owner == CORE_OWNER:
            continue
        lanes = [f"adaptive.{slot.name}[{lane}]" for lane in range(slot.width)] if slot.width > 1 else []
        names.update(lanes or [f"adaptive.{slot.name}"])
    return names


class BandWatch:
    """Per-metric counts of consecutive out-of-band epochs, checked against one :class:`BandsFile`."""

    def __init__(self, bands: BandsFile, source: str) -> None:
        self.bands = bands
        self.source = source
        self.patience = bands.patience
        self.outside: dict[str, list[tuple[int, int]]] = {name: [] for name in bands.metrics}
        self.beyond_logged = False

    def check(self, fold: int, epoch: int, row: Mapping[str, Any]) -> Breach | None:
        """This epoch's line against its bands: the breach that stops the run, or ``None``."""
        bands = self.bands.at(fold, epoch)
        if bands is None:
            if not self.beyond_logged:
                log.warning("bands: this epoch and later ones beyond the bands file are not checked", file=self.source,
                            fold=fold, epoch=epoch)
                self.beyond_logged = True
            return None
        flat = flatten_metrics(row)
        worst: Breach | None = None
        for name in self.bands.metrics:
            value = flat.get(name, math.nan)
            low, high = bands.band(name, self.bands.k)
            if low <= value <= high:
                self.outside[name].clear()
                continue
            self.outside[name].append((fold, epoch))
            finite = math.isfinite(value)
            seen = self.outside[name]
            if finite:
                log.warning("out of band", file=self.source, metric=name, value=value, low=low, high=high, fold=fold,
                            epoch=epoch, consecutive=len(seen), patience=self.patience)
            if worst is None and (not finite or len(seen) >= self.patience):
                worst = Breach(self.source, name, value, low, high, fold, epoch, tuple(seen), self.patience,
                               "out of band" if finite else "not finite")
        return worst


def open_band_watch(path: str | Path | None, learner_metrics: Iterable[str], layout: IsvLayout) -> BandWatch | None:
    """The watch of a run's ``[run] bands`` file (``None`` when there is none); a metric the run does not write
    is a :class:`ConfigError` naming the file and the metric, raised before training starts."""
    if path is None:
        return None
    bands = load_bands(Path(path))
    written = run_metric_names(learner_metrics, layout)
    missing = [name for name in bands.metrics if name not in written]
    if missing:
        raise ConfigError(f"{path}: metrics: this run writes no metric {', '.join(missing)}; the bands file was "
                          "fitted on runs of another config (other loss components or plugins). Fit bands on runs "
                          "of this config with `foxhunt bands fit`, or train with the config they were fitted on")
    return BandWatch(bands, str(path))
