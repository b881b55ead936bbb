"""The run directory: every artifact of a run, in files people and tools can read, and the rules for claiming it.

```
RUN_DIR/
  foxhunt-run.json     marker: this folder is a foxhunt training run (what foxhunt may write into)
  foxhunt.lock         while a process writes the run: its PID and host (run_lock.py)
  config.toml          the fully resolved config
  plugins.json         the plugin set with distributions and versions
  metrics.jsonl        one line per epoch and fold (metrics_log.py)
  checkpoints/         fold_K/ (best epoch of fold K, chosen on validation), resume/ (the last epoch boundary,
                       removed when the run finishes)
  tensorboard/         with [run] tensorboard: the per-epoch metrics as TensorBoard event files (tensorboard_log.py)
  equity/fold_K.csv    test equity curves of fold K's chosen policy (agent and baselines): out of sample
  equity/fold_K_validation.csv   validation equity curves of the same epoch (the window it was chosen on)
  summary.json         per fold and overall metrics, test and validation apart, against buy-and-hold and flat;
                       written last: a run with summary.json is finished, and is never resumed or rewritten
  report.html          plots (rebuild with `foxhunt report RUN_DIR`)
```

foxhunt writes only into a folder that is new, empty, or marked as its own
(``foxhunt-run.json`` names the kind: a training run, or ``foxhunt backtest``
output): a folder of someone's files is refused before anything is written, and
a backtest never writes into a training run. Every file is replaced atomically
(:mod:`foxhunt.durable`), so a kill leaves the old content or the new.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
from pathlib import Path
from typing import Any

import structlog

from foxhunt import __version__, durable
from foxhunt.errors import FoxhuntError
from foxhunt.trainer.metrics_log import MetricsLog
from foxhunt.trainer.run_lock import LOCK_FILE, RunLock, RunLocked

__all__ = ["RunDirectory", "BacktestDirectory", "fresh_run_path", "equity_file_name", "MARKER_FILE"]

log = structlog.get_logger(__name__)

MARKER_FILE = "foxhunt-run.json"
TRAIN, BACKTEST = "train", "backtest"
_WHAT = {TRAIN: "a foxhunt training run", BACKTEST: "`foxhunt backtest` output"}
# What a start leaves before its first epoch: files a failed start may remove again, holding nothing of value
_START_FILES = (MARKER_FILE, "config.toml", "plugins.json", "metrics.jsonl")


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


def folder_kind(path: Path) -> str | None:
    """The kind its marker names (``train``, ``backtest``), ``?`` for an unreadable marker, None without one."""
    try:
        marker = json.loads((Path(path) / MARKER_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "?"
    kind = marker.get("kind") if isinstance(marker, dict) else None
    return kind if kind in _WHAT else "?"


def _is_empty(path: Path) -> bool:
    return not any(path.iterdir())


class _Folder:
    """A folder foxhunt writes its own kind of output into, claimed by the rules in the module docstring."""

    kind: str

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.created = not self.path.exists()

    def _refuse_foreign(self, unmarked_ok: bool = False) -> None:
        """Read-only checks, before anything is created or written in the folder."""
        path = self.path
        if path.exists() and not path.is_dir():
            raise FoxhuntError(f"cannot create the run directory {path}: it is a file; choose another --out")
        # a lock file alone is what a kill between taking the lock and writing the marker leaves
        if not path.is_dir() or {entry.name for entry in path.iterdir()} <= {LOCK_FILE}:
            return
        kind = folder_kind(path)
        if kind is None and unmarked_ok:
            return
        if kind is None:
            raise FoxhuntError(
                f"{path} exists and is not a foxhunt folder (it is not empty and has no {MARKER_FILE}); foxhunt "
                "writes only into a new or empty folder or one of its own, so nothing there was changed. "
                "Choose another --out"
            )
        if kind != self.kind:
            raise FoxhuntError(
                f"{path} holds {_WHAT.get(kind, 'a foxhunt folder with an unreadable ' + MARKER_FILE)}, not "
                f"{_WHAT[self.kind]}; nothing there was changed. Choose another --out"
            )

    def _create(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise FoxhuntError(f"cannot create the run directory {self.path}: {error.strerror}; choose another --out") from None
        if not os.access(self.path, os.W_OK):
            raise FoxhuntError(f"the run directory {self.path} is not writable; choose another --out")

    def _mark(self) -> None:
        if folder_kind(self.path) != self.kind:
            created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            self.write_json(MARKER_FILE, {"kind": self.kind, "foxhunt_version": __version__, "created": created})

    def _before_write(self) -> None:
        """Called before each write (a backtest folder is created at its first)."""

    def write_text(self, name: str, text: str) -> Path:
        self._before_write()
        return durable.write_text(self.path / name, text)

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def write_equity(self, fold: int, timestamps: list[str], curves: dict[str, list[float]], window: str = "test") -> Path:
        """Equity of fold ``fold`` on its ``window``: one row per bar of the window (the first row: the initial cash)."""
        self._before_write()
        names = list(curves)
        text = io.StringIO(newline="")
        writer = csv.writer(text)
        writer.writerow(["timestamp", *names])
        for index, stamp in enumerate(timestamps):
            writer.writerow([stamp, *(repr(float(curves[name][index])) for name in names)])
        (self.path / "equity").mkdir(exist_ok=True)
        return durable.write_text(self.path / "equity" / equity_file_name(fold, window), text.getvalue())


class RunDirectory(_Folder):
    """Paths and writers for one training run's artifacts, held under the run's lock from construction to
    :meth:`release` (:meth:`Trainer.run <foxhunt.trainer.trainer.Trainer.run>` releases it when it returns)."""

    kind = TRAIN

    def __init__(self, path: Path, *, resume: bool = False) -> None:
        super().__init__(path)
        if resume and not self.path.is_dir():
            raise FoxhuntError(f"{self.path}: no such run folder; nothing to resume")
        # a run written before folders carried the marker is recognised, for --resume only, by its config.toml
        self._refuse_foreign(unmarked_ok=resume and (self.path / "config.toml").is_file())
        self._create()
        self.lock = RunLock(self.path)
        self.lock.acquire()
        try:
            self._check_state(resume)
            self._mark()
            (self.path / "checkpoints").mkdir(exist_ok=True)
            (self.path / "equity").mkdir(exist_ok=True)
            if resume:
                self._recover_checkpoints()
        except BaseException:
            self.lock.release()
            raise
        self.metrics = MetricsLog(self.metrics_path)

    def _check_state(self, resume: bool) -> None:
        """Under the lock, so that two processes cannot both pass it."""
        if self.finished:
            raise FoxhuntError(
                f"{self.path}: the run finished (it has summary.json); a finished run is never resumed or rewritten. "
                "Start a new run with another --out"
            )
        if not resume and self.holds_training():
            raise FoxhuntError(
                f"{self.path} already holds a run that stopped before it finished; pass --resume {self.path} to "
                "continue it, or choose another --out"
            )

    def _recover_checkpoints(self) -> None:
        """Finish checkpoint writes that a kill interrupted (:func:`foxhunt.durable.recover_directory`)."""
        names = {entry.name.removeprefix(".").split(".")[0] for entry in (self.path / "checkpoints").iterdir()
                 if entry.name.startswith(".")}
        for name in sorted(names):
            done = durable.recover_directory(self.checkpoint_dir(name))
            if done is not None:
                log.warning("checkpoint write interrupted by the stop; recovered", checkpoint=name, action=done)

    @property
    def finished(self) -> bool:
        return (self.path / "summary.json").exists()

    def holds_training(self) -> bool:
        """Whether any epoch left a trace (a metric line, a checkpoint, a result): then only --resume may continue."""
        metrics = self.path / "metrics.jsonl"
        if self.finished or (metrics.exists() and metrics.stat().st_size > 0):
            return True
        return any(not entry.name.startswith(".") for folder in ("checkpoints", "equity")
                   if (self.path / folder).is_dir() for entry in (self.path / folder).iterdir())

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    def checkpoint_dir(self, name: str) -> Path:
        return self.path / "checkpoints" / name

    def append_metrics(self, row: dict[str, Any]) -> None:
        self.metrics.append(row)

    def sync_metrics(self) -> None:
        self.metrics.sync()

    def truncate_metrics(self, keep_lines: int) -> None:
        """Drop a torn last line and metric lines written after the resume checkpoint (an epoch that did not finish)."""
        self.metrics.restore(keep_lines)

    def metric_lines(self) -> int:
        return self.metrics.lines()

    def release(self) -> None:
        """Close the metrics file and give up the lock (another process may then resume the run)."""
        self.metrics.close()
        self.lock.release()

    def discard_if_unstarted(self) -> None:
        """After a start that failed before its first epoch: remove what it wrote, leaving the folder as it was
        found (removed when this run created it). A folder that holds any epoch is left alone, and so is one
        another process took over meanwhile."""
        try:
            if not self.lock.held:
                self.lock.acquire()
        except RunLocked:
            return
        try:
            if self.holds_training():
                return
            for name in _START_FILES:
                (self.path / name).unlink(missing_ok=True)
            for folder in ("checkpoints", "equity"):
                if (self.path / folder).is_dir() and _is_empty(self.path / folder):
                    (self.path / folder).rmdir()
        finally:
            self.release()
        if self.created:
            try:
                self.path.rmdir()  # only if empty: a file that appeared meanwhile is not ours to delete
            except OSError:
                pass


class BacktestDirectory(_Folder):
    """Where ``foxhunt backtest --out`` writes ``backtest.json`` and ``equity/fold_0.csv``: never a training run.

    The folder is checked when this is made (read-only: a refused folder is refused before the backtest runs)
    and created and marked at the first write.
    """

    kind = BACKTEST

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._refuse_foreign()
        self._ready = False

    def _before_write(self) -> None:
        if not self._ready:
            self._refuse_foreign()  # again: the folder may have changed while the backtest ran
            self._create()
            self._ready = True
            self._mark()
