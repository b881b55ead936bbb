"""The run directory: every artifact of a run, in files people and tools can read.

```
RUN_DIR/
  config.toml          the fully resolved config
  plugins.json         the plugin set with distributions and versions
  metrics.jsonl        one line per epoch and fold
  checkpoints/         fold_K/ (best epoch of fold K, chosen on validation), resume/ (written on a graceful stop)
  equity/fold_K.csv    test equity curves of fold K's chosen policy (agent and baselines): out of sample
  equity/fold_K_validation.csv   validation equity curves of the same epoch (the window it was chosen on)
  summary.json         per fold and overall metrics, test and validation apart, against buy-and-hold and flat
  report.html          plots (rebuild with `foxhunt report RUN_DIR`)
```
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from foxhunt.errors import FoxhuntError

__all__ = ["RunDirectory", "fresh_run_path", "equity_file_name"]


def equity_file_name(fold: int, window: str = "test") -> str:
    """``fold_K.csv`` for the test window (what is reported), ``fold_K_validation.csv`` for the selection window."""
    if window == "test":
        return f"fold_{fold}.csv"
    if window == "validation":
        return f"fold_{fold}_validation.csv"
    raise ValueError(f"window must be 'test' or 'validation', got {window!r}")


def fresh_run_path(base: Path) -> Path:
    """A new timestamped folder name under ``base`` (never an existing one)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    candidate = base / stamp
    suffix = 1
    while candidate.exists():
        suffix += 1
        candidate = base / f"{stamp}-{suffix}"
    return candidate


class RunDirectory:
    """Paths and writers for one run's artifacts."""

    def __init__(self, path: Path, *, resume: bool = False) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            (self.path / "checkpoints").mkdir(exist_ok=True)
            (self.path / "equity").mkdir(exist_ok=True)
        except OSError as error:
            raise FoxhuntError(f"cannot create the run directory {self.path}: {error.strerror}; choose another --out") from None
        if not os.access(self.path, os.W_OK):
            raise FoxhuntError(f"the run directory {self.path} is not writable; choose another --out")
        if not resume and (self.path / "metrics.jsonl").exists():
            raise FoxhuntError(
                f"{self.path} already holds a run (metrics.jsonl exists); pass --resume {self.path} to continue it, "
                "or choose another --out"
            )

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    def checkpoint_dir(self, name: str) -> Path:
        return self.path / "checkpoints" / name

    def write_text(self, name: str, text: str) -> Path:
        target = self.path / name
        temp = target.with_name(f".{target.name}.tmp")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, target)
        return target

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def append_metrics(self, row: dict[str, Any]) -> None:
        with open(self.metrics_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, sort_keys=True) + "\n")

    def truncate_metrics(self, keep_lines: int) -> None:
        """Drop metric lines written after the resume checkpoint (an epoch that did not finish)."""
        if not self.metrics_path.exists():
            return
        lines = self.metrics_path.read_text(encoding="utf-8").splitlines(keepends=True)
        self.metrics_path.write_text("".join(lines[:keep_lines]), encoding="utf-8")

    def metric_lines(self) -> int:
        if not self.metrics_path.exists():
            return 0
        return sum(1 for line in self.metrics_path.read_text(encoding="utf-8").splitlines() if line.strip())

    def write_equity(self, fold: int, timestamps: list[str], curves: dict[str, list[float]], window: str = "test") -> Path:
        """Equity of fold ``fold`` on its ``window``: one row per bar of the window (the first row: the initial cash)."""
        target = self.path / "equity" / equity_file_name(fold, window)
        names = list(curves)
        with open(target, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["timestamp", *names])
            for index, stamp in enumerate(timestamps):
                writer.writerow([stamp, *(repr(float(curves[name][index])) for name in names)])
        return target
