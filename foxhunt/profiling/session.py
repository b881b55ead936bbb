"""The profiled run: training steps and epoch boundaries of a config under ``torch.profiler``.

:func:`profile_run` builds the configured run in a temporary run directory,
enters its first fold and warms up (the fold's replay warm-up, a few steps with
updates, so numba compilation, ``torch.compile`` and CUDA graph capture happen
before anything is measured, and one epoch boundary). Then, under
``torch.profiler`` (CPU activity, plus CUDA on a CUDA run), it runs
``steps`` training steps and ``boundaries`` epoch boundaries exactly as the
trainer does: each step is one ``collect`` and the epoch plan's share of
``update`` calls (through the trainer's :class:`~foxhunt.trainer.graphs.StepGraphs`,
so a CUDA run replays its graphs); each boundary is the greedy ``validation``
backtest and the ``checkpoint`` writes.

Every call of a phase is one ``torch.profiler.record_function`` range named
``foxhunt.<phase>`` (seen in the Chrome trace) and is timed on the wall clock.
On CUDA the device is synchronised at each phase boundary, here only: the
trainer's own hot path never waits, so without it GPU work would be charged to
whichever phase next waits for the device.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from foxhunt.config import FoxhuntConfig
from foxhunt.folds import Fold
from foxhunt.profiling.record import PHASES, PhaseProfile, PhaseTime, machine_info
from foxhunt.trainer import evaluation, resume
from foxhunt.trainer.config import EpochPlan
from foxhunt.trainer.graphs import WARMUP_CALLS
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

__all__ = ["ProfileOptions", "OpRow", "ProfileResult", "profile_run", "range_name"]


def range_name(phase: str) -> str:
    """The ``record_function`` range of a phase, as the Chrome trace and the op table show it."""
    return f"foxhunt.{phase}"


@attrs.frozen
class ProfileOptions:
    """What :func:`profile_run` measures."""

    steps: int = attrs.field(default=50, validator=attrs.validators.ge(1))  # training steps profiled
    # steps with updates run before profiling, past the fold's replay warm-up: CUDA graphs capture after
    # WARMUP_CALLS eager calls, so one more makes every profiled step a replay
    warmup: int = attrs.field(default=WARMUP_CALLS + 1, validator=attrs.validators.ge(0))
    boundaries: int = attrs.field(default=1, validator=attrs.validators.ge(1))  # epoch boundaries profiled
    top: int = attrs.field(default=15, validator=attrs.validators.ge(1))  # rows of each op table
    trace: Path | None = None  # Chrome trace written here (open in chrome://tracing or ui.perfetto.dev)


@attrs.frozen
class OpRow:
    """One op, kernel or range of the profiler's averages; times in microseconds."""

    name: str
    calls: int
    self_cpu_us: float
    cpu_us: float
    self_device_us: float


@attrs.frozen
class ProfileResult:
    """The phase times (what a baseline records), the top host and device rows, where the trace went."""

    profile: PhaseProfile
    host: tuple[OpRow, ...]
    device: tuple[OpRow, ...]
    trace: Path | None


class _PhaseClock:
    """Wall time and calls per phase; each call a ``record_function`` range, the device synchronised around it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.calls = dict.fromkeys(PHASES, 0)
        self.seconds = dict.fromkeys(PHASES, 0.0)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._sync()
        started = time.perf_counter()
        with record_function(range_name(name)):
            yield
            self._sync()  # inside the range, so the trace's range covers the phase's device work
        self.seconds[name] += time.perf_counter() - started
        self.calls[name] += 1

    def times(self) -> dict[str, PhaseTime]:
        return {name: PhaseTime(self.calls[name], self.seconds[name]) for name in PHASES}


def _update_counts(plan: EpochPlan) -> Iterator[int]:
    """Updates after each vector step from the fold's start on, as the trainer's epochs lay them out."""
    for step in itertools.count():
        yield plan.updates_after(*divmod(step, plan.vector_steps))


def _step(trainer: Trainer, clock: _PhaseClock, updates: int) -> None:
    """``Trainer.train_step``, each half timed."""
    with clock.phase("collect"):
        trainer.graphs.collect()
    for _ in range(updates):
        with clock.phase("update"):
            trainer.graphs.update()


def _boundary(trainer: Trainer, fold: Fold, clock: _PhaseClock) -> None:
    """The epoch boundary's validation backtest and its two checkpoint writes, as ``Trainer._train_fold`` runs them."""
    with clock.phase("validation"):
        result = trainer.backtests.agent(trainer.learner.act_values, trainer.features,
                                         (fold.validation.start, fold.validation.stop), trainer.device)
        validation = evaluation.metrics_of(result)
    with clock.phase("checkpoint"):
        resume.save(trainer, resume.Position(fold=fold.index, epoch=1))
        resume.save_policy(trainer, fold, 0, validation)


def _self_device_us(event: Any) -> float:
    return float(getattr(event, "self_device_time_total", getattr(event, "self_cuda_time_total", 0.0)))


def _rows(prof: profile, top: int) -> tuple[tuple[OpRow, ...], tuple[OpRow, ...]]:
    """The ``top`` rows by self CPU time, and (CUDA) the ``top`` by self device time: kernels."""
    rows = [
        OpRow(e.key, int(e.count), float(e.self_cpu_time_total), float(e.cpu_time_total), _self_device_us(e))
        for e in prof.key_averages()
    ]
    host = sorted(rows, key=lambda r: r.self_cpu_us, reverse=True)[:top]
    device = sorted((r for r in rows if r.self_device_us > 0), key=lambda r: r.self_device_us, reverse=True)[:top]
    return tuple(host), tuple(device)


def _run_info(config: FoxhuntConfig, options: ProfileOptions, plan: EpochPlan) -> dict[str, Any]:
    return {
        "data": config.data.source,
        "n_envs": config.env.n_envs,
        "batch_size": config.learner.batch_size,
        "updates_per_vector_step": plan.updates / plan.vector_steps,
        "compile": config.learner.compile,
        "cuda_graph": config.run.cuda_graph,
        "steps": options.steps,
        "warmup": options.warmup,
        "boundaries": options.boundaries,
    }


def _profile(trainer: Trainer, options: ProfileOptions) -> ProfileResult:
    fold = trainer.data.folds[0]
    trainer._start_fold(fold)
    plan = trainer.plan
    counts = _update_counts(plan)
    warm = _PhaseClock(trainer.device)  # warm-up times are thrown away
    for updates in itertools.islice(counts, plan.warmup_vector_steps + options.warmup):
        _step(trainer, warm, updates)
    _boundary(trainer, fold, warm)
    clock = _PhaseClock(trainer.device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if trainer.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for updates in itertools.islice(counts, options.steps):
            _step(trainer, clock, updates)
        for _ in range(options.boundaries):
            _boundary(trainer, fold, clock)
    if options.trace is not None:
        options.trace.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(options.trace))
    host, device = _rows(prof, options.top)
    recorded = PhaseProfile(clock.times(), machine_info(trainer.device), _run_info(trainer.config, options, plan))
    return ProfileResult(recorded, host, device, options.trace)


def profile_run(config: FoxhuntConfig, options: ProfileOptions = ProfileOptions()) -> ProfileResult:
    """Profile ``config``'s training (its first fold) in a temporary run directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="foxhunt-profile-") as directory:
        run_dir = RunDirectory(Path(directory) / "run")
        try:
            trainer = Trainer(config, run_dir, show_progress=False)
            trainer._build()
            try:
                return _profile(trainer, options)
            finally:
                trainer._close()
        finally:
            run_dir.release()
