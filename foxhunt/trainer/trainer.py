"""The walk-forward training run, readable top to bottom in :meth:`Trainer.run`.

For each fold: reset through the state-reset registry, run the fold kernels;
for each epoch (a training window: the window-reset entries start afresh):
collect experience with the current policy in the vectorised environment
and learn (on CUDA, replaying the step from captured CUDA graphs:
:mod:`foxhunt.trainer.graphs`), run the adaptive kernels at their points, let
the monitors observe a read-only snapshot, backtest the greedy policy on the
validation window, and keep the fold's best checkpoint; after the fold's last
epoch, backtest that checkpoint once on the held-out test window, which is
what the run reports. Every epoch boundary writes a resume checkpoint
(:mod:`foxhunt.trainer.resume`), so a killed run loses at most one epoch; a
stop request (Ctrl-C, SIGTERM) is honoured at the next epoch boundary, and
``--resume`` ends with the same results as an uninterrupted run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import structlog
import torch

from foxhunt import contract
from foxhunt.actions import branch_sizes
from foxhunt.config import FoxhuntConfig, dump_config
from foxhunt.plugin.core_declarations import PROGRESS
from foxhunt.monitoring.epoch_diagnostics import epoch_diagnostics
from foxhunt.learner.exploration import BranchExplorer
from foxhunt.learner.execution_credit import EXECUTION_BRANCHES
from foxhunt.env.run_kernel import env_step_kernel, replaced_kernels
from foxhunt.env.tables import PS
from foxhunt.env.vector import VectorEnv
from foxhunt.errors import BandStop, FoxhuntError, NumericalFault
from foxhunt.folds import Fold, describe_folds
from foxhunt.plugin.foreign_writes import refuse_foreign_writes
from foxhunt.isv import ISV
from foxhunt.kernels.backend import concrete_device, resolve_backend
from foxhunt.kernels.context import KernelContext
from foxhunt.learner import Learner
from foxhunt.monitoring.metrics_export import MetricsEndpoint, MetricsExporter
from foxhunt.monitoring.monitors import attach_monitors
from foxhunt.plugin.host import PluginHost
from foxhunt.profiles import device_name
from foxhunt.plugin.records import AugmentationFold, KernelPoint
from foxhunt.state_loading import load_in_place
from foxhunt.trainer import evaluation, resume, snapshots
from foxhunt.trainer.band_watch import open_band_watch
from foxhunt.trainer.collect_pieces import EAGER_COLLECT_PIECES, compiled_collect_pieces
from foxhunt.trainer.fault_checks import StepFaultChecks
from foxhunt.trainer.fold_result import fold_result
from foxhunt.trainer.graphs import StepGraphs
from foxhunt.trainer.metrics_row import epoch_metrics_row
from foxhunt.trainer.progress import RunProgress
from foxhunt.trainer.recovery import PlateauRecovery
from foxhunt.trainer.run_data import normalised_features, prepare_data
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.tensorboard_log import TENSORBOARD_DIR, TensorBoardLog

__all__ = ["Trainer", "resolve_device", "EpochCallback"]

# on_epoch(fold index, epoch, validation metrics of that epoch): called once per epoch of every fold, right
# after the validation backtest. To end the run, a callback requests a stop on the trainer's ``stop`` object
# (``stop.requested`` true): the epoch still finishes its bookkeeping, a resume checkpoint is written and
# ``run`` returns None, the same clean path as Ctrl-C. ``foxhunt tune`` prunes trials this way.
EpochCallback = Callable[[int, int, dict[str, float]], None]

log = structlog.get_logger(__name__)

EPSILON_SLOT = contract.EPSILON
FALLBACK_EPSILON = 0.05  # exploration rate per branch when no plugin declares epsilon.branch
HEALTH_SLOT = contract.HEALTH


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else the CPU; ``cuda`` without a GPU is an error."""
    name = device_name(name)
    if name == "cuda" and not torch.cuda.is_available():
        raise FoxhuntError("--device cuda was asked for, but torch sees no CUDA GPU; use --device cpu or auto")
    return concrete_device(name)


class Trainer:
    """One training run over every fold of a config, writing into a :class:`RunDirectory`."""

    def __init__(
        self,
        config: FoxhuntConfig,
        run_dir: RunDirectory,
        *,
        stop: Any = None,
        show_progress: bool = True,
        metrics_port: int | MetricsEndpoint | None = None,
        run_id: str | None = None,
        on_epoch: EpochCallback | None = None,
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.stop = stop
        self.on_epoch = on_epoch
        self.device = resolve_device(config.run.device)
        self.backend = resolve_backend(self.device, None)
        if self.device.type == "cuda":
            # TF32 matmuls on by default on CUDA (run.tf32); docs/gpu.md gives their accuracy cost.
            torch.backends.cuda.matmul.allow_tf32 = config.run.tf32
            torch.backends.cudnn.allow_tf32 = config.run.tf32
        self.started = time.perf_counter()
        self.first_update_seconds: float | None = None
        self.run_id = run_id or run_dir.path.name
        self.show_progress = show_progress
        self.metrics_port = metrics_port

    # -- construction ------------------------------------------------------------------
    def _build(self) -> None:
        config = self.config
        self.host = PluginHost(config.plugins).discover().declare()
        self.registries = self.host.freeze()
        self.data = prepare_data(config, table=self.host.feature_table(config))  # feature plugins' families too
        self.layout = self.registries.layout
        self.isv = ISV(self.layout, self.device)
        self.registries.state.attach_isv(self.isv)
        components = self.host.loss_components(config)  # none enabled: the learner's budget check says so
        kernels = self.host.kernels(config)
        self.monitors = self.host.monitors(config)
        self.host.start()
        self.kernels = {point: [k for k in kernels if k.point is point] for point in KernelPoint}
        self.env_kernel = env_step_kernel(kernels)
        env_owners = [self.env_kernel.name, *(kernel.name for kernel in replaced_kernels(self.env_kernel, kernels))]
        market, features = self.data.market, self.data.features
        seed = config.run.seed
        health = self.isv.view(HEALTH_SLOT) if HEALTH_SLOT in self.layout.offsets else None
        first = self.data.folds[0]
        self.env = VectorEnv(
            market.ohlcv, np.zeros(features.values.shape, dtype=np.float32), market.instrument, config.env,
            window=(first.train.start, first.train.stop), seed=seed, device=self.device, health=health,
            step_kernel=self.env_kernel.run, execution_part=config.learner.reward_split,
            isv=self.isv.tensor, layout=self.layout,
        )
        self._attach_env_state(env_owners)
        # validation and test backtests step through the kernel the run trains with (a plugin's physics too)
        self.backtests = evaluation.RunBacktests(market.ohlcv, market.instrument, config.env, self.env_kernel.run,
                                                 self.isv)
        self.learner = Learner(
            config, self.layout, self.isv, components, self.env.observation_size, self.device, seed,
            n_envs=config.env.n_envs, combiners=self.host.gradient_combiners(config),
            encoders=self.host.encoders(config), n_features=self.env.n_features,
            augmentations=self.host.replay_augmentations(config),
        )
        self.learner.use_features(self.env.features)  # rewritten in place per fold: windows gather from it
        self.learner.attach_state(self.registries.state)
        train = config.train  # [train.recovery] (off by default): plateau recovery, foxhunt/trainer/recovery.py
        self.recovery = PlateauRecovery(train.recovery, train.validation_metric, self.learner) if train.recovery.enabled else None
        attach_monitors(self.registries.state, self.monitors)
        self.registries.state.attach_factories()
        unattached = self.registries.state.unattached()
        if unattached:
            raise FoxhuntError(
                "state declared but never wired into the run (invariant 2): "
                + ", ".join(unattached)
                + ". The plugin that declares it must provide the object, or disable that plugin."
            )
        self.explorer = BranchExplorer(config.env.n_envs, seed, self.device)
        self.prev_obs = torch.zeros_like(self.env.obs)
        self.windowed = self.learner.window > 1  # an encoder window: acting and the replay need bar indices
        # an auxiliary task's future returns: the replay keeps each transition's bar index as well
        self.tracks_bars = self.windowed or self.learner.future_horizon > 0
        self.prev_bars = torch.zeros(config.env.n_envs, dtype=torch.int64, device=self.device)
        self.branch_sizes = branch_sizes()
        sizes = self.branch_sizes
        self.action_offsets = torch.tensor(np.cumsum([0, *sizes[:-1]]), dtype=torch.int64, device=self.device)
        self.action_counts = torch.zeros(sum(sizes), dtype=torch.float32, device=self.device)
        self.action_bins = torch.arange(sum(sizes), dtype=torch.int64, device=self.device)
        # ε per branch lives in the ISV when the epsilon plugin is enabled; otherwise a constant device tensor.
        self.epsilon = (
            self.isv.view(EPSILON_SLOT)
            if EPSILON_SLOT in self.layout.offsets
            else torch.full((len(sizes),), FALLBACK_EPSILON, device=self.device)
        )
        self.step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.exporter = MetricsExporter(self.run_id)
        self.metrics_server = self.exporter.serve(self.metrics_port) if self.metrics_port is not None else None
        self.tensorboard = (
            TensorBoardLog(self.run_dir.path / TENSORBOARD_DIR, config.train.most_fold_epochs)
            if config.run.tensorboard else None
        )
        self.kernel_context = KernelContext(
            self.device, self.backend, self.isv.tensor, self.layout, self._signals(), self.step_counter
        )
        # Before the first real launch: a kernel that changes another plugin's slot is refused here, named, rather
        # than fighting that plugin for the value all run (foxhunt/plugin/foreign_writes.py).
        owners = {name: self.host.plugins[plugin] for name, plugin in self.host.kernel_owners.items()}
        self.write_check_seconds = refuse_foreign_writes(kernels, owners, self.kernel_context)
        self._run_kernels(KernelPoint.CONSTRUCT)
        self.plan = config.train.plan(config.env.n_envs)
        # [learner] compile also fuses collection's torch work (the C51 expectation over atoms, the hash RNG
        # of exploration, the replay insert): eager, it is hundreds of small kernels per vector step.
        self.collect_pieces = compiled_collect_pieces() if config.learner.compile else EAGER_COLLECT_PIECES
        self.fault_checks = StepFaultChecks(self.learner, self.isv, self.env_kernel.name, self.device)
        self.graphs = StepGraphs(
            self._collect, self._update, enabled=self.device.type == "cuda" and config.run.cuda_graph,
            update_generators=(self.learner.generator,),
        )
        # [run] bands: a file for another config is refused here, before the first epoch (docs/bands.md)
        self.band_watch = open_band_watch(config.run.bands, self.learner.metrics(), self.layout)

    def _attach_env_state(self, env_kernels: list[str]) -> None:
        """The environment object carries the state its physics plugins declared (portfolio, plans, streams): the
        plugin of the kernel it steps with and of each kernel that one replaces."""
        owners = {self.host.kernel_owners[name] for name in env_kernels}
        for entry in self.registries.state.entries():
            if entry.owner in owners and not entry.is_isv_slot:
                self.registries.state.attach(entry.name, self.env)

    def _run_kernels(self, point: KernelPoint) -> None:
        # One context for the whole run: kernels bind its tensors at their first launch, and every signal
        # is updated in place, so later launches see new values with no allocation and no host sync.
        for kernel in self.kernels[point]:
            kernel.run(self.kernel_context)

    # -- the run -----------------------------------------------------------------------
    def run(self, resume_from: Path | None = None) -> dict[str, Any] | None:
        """Train every fold; returns the summary, or ``None`` when stopped early (a resume checkpoint is written).

        The run directory's lock is released when this returns or raises.
        """
        try:
            if resume_from is None:  # first, before the slow build: a run killed while starting can resume from it
                self.run_dir.write_text("config.toml", dump_config(self.config))
            self._build()
            self.run_dir.write_json("plugins.json", self.host.versions())
            return self._run(resume_from)
        finally:
            self.run_dir.release()

    @property
    def _folds(self) -> list[Fold]:
        """The folds this run trains: all of them, or the one ``folds.only`` names (at its walk-forward place)."""
        return [self.data.folds[index] for index in self.config.folds.selected()]

    def _run(self, resume_from: Path | None) -> dict[str, Any] | None:
        folds = self._folds
        position = resume.Position(fold=folds[0].index)
        if resume_from is not None:
            position = resume.restore(self, resume_from)  # refuses another config before config.toml is touched
            if self.config.train.policy_epochs > 1 and position.epoch > 0:
                snapshots.write_fold_policy(self, self.data.folds[position.fold], position)
            self.run_dir.write_text("config.toml", dump_config(self.config))  # `--device` may have changed run.device
        rows = describe_folds(folds, self.data.market.timestamps)
        for row in rows:
            log.info("fold", **attrs.asdict(row))
        with RunProgress(self.show_progress, len(folds), self.config.train.epochs) as progress:
            for fold in folds:
                if fold.index < position.fold:
                    continue  # finished before the resume checkpoint
                resumed = position.fold == fold.index and position.epoch > 0
                if not resumed:
                    position.fold, position.epoch = fold.index, 0
                if not self._train_fold(fold, position, progress):
                    self._close()
                    return None
        summary = self._summary(position.results)
        self.run_dir.write_json("summary.json", summary)  # from here on the run is finished
        resume.discard(self)
        self._close()
        return summary

    def _close(self) -> None:
        if self.metrics_server is not None:
            self.metrics_server.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        self.host.close()

    def enter_fold(self, fold: Fold) -> None:
        """Point the run at ``fold``'s data: per-fold normalised features, training window, validation baselines."""
        structlog.contextvars.bind_contextvars(fold=fold.index)
        features, self.normalizer = normalised_features(self.data.features, fold, self.config.features.clip)
        self.features = features
        self.env.features.copy_(torch.from_numpy(features))
        # the replay augmentations' constants for this fold (the mirror's map from the fold's normaliser, over
        # every bar of the encoder's window)
        self.learner.replay.set_fold(AugmentationFold(tuple(self.data.features.names), self.normalizer,
                                                      self.env.params.detach().cpu().numpy().astype(np.float64),
                                                      window=self.learner.window,
                                                      feature_parity=self.data.features.parity,
                                                      execution_branches=EXECUTION_BRANCHES
                                                      if self.config.learner.reward_split else ()))
        self.env.set_window(fold.train.start, fold.train.stop)
        self.learner.use_future_returns(self.data.market.close, fold.train.start, fold.train.stop)
        self.validation_baselines = self.backtests.baselines(features, (fold.validation.start, fold.validation.stop))

    def _start_fold(self, fold: Fold) -> None:
        """Fold boundary on new data: the fold's data (:meth:`enter_fold`), then :meth:`_fold_boundary`."""
        self.enter_fold(fold)
        self._fold_boundary()

    def _fold_boundary(self) -> None:
        """Every fold-reset and soft-reset entry reset, fold kernels run; the networks are kept. Also run on the
        same fold's data again after a burn-in and at a flat-fold retry, which need no new data."""
        self.graphs.reset()  # captured against the last fold's buffers and warm-up: capture afresh
        reset = self.registries.state.fold_boundary()
        log.info("fold boundary", reset=len(reset))
        if self.recovery is not None:
            self.recovery.start_fold()
        self._run_kernels(KernelPoint.FOLD)
        self.obs = self.env.obs  # the environment plugin's fold-reset entry started every episode afresh

    def _start_window(self) -> None:
        """Window boundary: every epoch collects a new window of experience, so each window-reset entry starts
        from its initial value. Runs before the epoch's first step, also for the first epoch of a resumed run."""
        reset = self.registries.state.window_boundary()
        if reset:
            log.debug("window boundary", reset=len(reset))

    def _train_fold(self, fold: Fold, position: resume.Position, progress: RunProgress) -> bool:
        train = self.config.train
        if position.epoch == 0:
            self._start_fold(fold)
            if train.burn_in_epochs and fold.index == self._folds[0].index:
                self._burn_in(fold, position, progress)
                self._fold_boundary()
            position.best, position.snapshots = None, []
        while position.epoch < self._fold_epochs(position):
            epoch = position.epoch
            if epoch % train.epochs == 0 and epoch > 0:  # a flat-fold retry's first epoch: the fold boundary again
                self._fold_boundary()
            stats, encoder = self._train_epoch(fold, epoch, train.epochs, position, progress)
            diagnostics = self._observe(fold.index, epoch)
            validation_started = time.perf_counter()
            result = self.backtests.agent(self.learner.act_values, self.features,
                                          (fold.validation.start, fold.validation.stop), self.device)
            validation = evaluation.metrics_of(result)
            stats["validation_seconds"] = time.perf_counter() - validation_started
            if self.on_epoch is not None:
                self.on_epoch(fold.index, epoch, dict(validation))
            score = validation[train.validation_metric]
            is_best = evaluation.better(train.validation_metric, score, position.best and position.best["score"])
            if is_best:
                position.best = {"score": score, "epoch": epoch, "agent": validation, "equity": result.equity.tolist()}
            # [train] policy_epochs > 1: the epoch's file is written now, before a recovery rewinds the learner
            ranked = train.policy_epochs > 1 and snapshots.offer(self, fold, position, epoch, score, validation)
            recovery = self._plateau_recovery(fold, epoch, score, validation, is_best)
            row = epoch_metrics_row(self, fold.index, epoch, stats, validation, diagnostics, encoder)
            if recovery is not None:
                row["recovery"] = recovery
            if self._flat_fold_retry(fold, epoch, validation, position):
                row["flat_fold_retry"] = position.retries
            self.run_dir.append_metrics(row)
            if self.tensorboard is not None:  # the epoch boundary only, never the step
                self.tensorboard.add_epoch(row)
            progress.epoch_done(fold.index, epoch % train.epochs, validation, stats)
            position.epoch = epoch + 1
            # The epoch boundary: the resume checkpoint, then the fold's best policy (never ahead of it: see resume)
            self._save_resume(position)
            if ranked:
                snapshots.write_fold_policy(self, fold, position)
            elif train.policy_epochs == 1 and is_best and not (recovery or {}).get("fired"):  # a recovery saved it before rewinding
                resume.save_policy(self, fold, epoch, validation)
            self._stop_out_of_band(fold.index, epoch, row, position)
            if self._stop_requested() and position.epoch < self._fold_epochs(position):
                return self._stopped(position)
        position.results.append(fold_result(self, fold, position.best, position.retries))
        if train.policy_epochs > 1:
            snapshots.finish_fold(self, fold)
        progress.fold_done(fold.index, position.results[-1]["test"]["agent"])
        position.fold, position.epoch, position.best, position.snapshots = fold.index + 1, 0, None, []
        position.retries = 0
        if self._stop_requested() and position.fold <= self._folds[-1].index:
            self._save_resume(position)  # past the fold's test, so a resume starts the next fold
            return self._stopped(position)
        return True

    def _burn_in(self, fold: Fold, position: resume.Position, progress: RunProgress) -> None:
        """``[train] burn_in_epochs``: epochs on the run's first fold before its own, from freshly initialised
        networks, trained as the fold's epochs are but neither validated nor selectable. The fold boundary the
        caller runs after them keeps the networks and resets the optimiser, schedules and replay. No resume
        checkpoint is written inside them: a stop request is honoured at the fold's first epoch boundary after
        them, and ``--resume`` of a run killed inside them trains from the start, as for one killed in its
        first epoch."""
        epochs = self.config.train.burn_in_epochs
        for epoch in range(epochs):
            stats, _ = self._train_epoch(fold, epoch, epochs, position, progress, burn_in=True)
            log.info("burn-in epoch done", epoch=epoch, epochs=epochs, updates=stats["updates"],
                     seconds=round(stats["seconds"], 2))

    def _fold_epochs(self, position: resume.Position) -> int:
        """The epochs the fold at ``position`` trains: ``train.epochs``, and as many again per flat-fold retry."""
        return self.config.train.fold_epochs(position.retries)

    def _flat_fold_retry(self, fold: Fold, epoch: int, validation: dict[str, float], position: resume.Position) -> bool:
        """``[train] flat_fold_retries``: after the fold's last epoch so far, a greedy policy that made no trade on
        validation (no fill) is a collapse; while retries are left, the fold's epochs are planned once more."""
        last = epoch + 1 == self._fold_epochs(position)
        if not last or validation["fills"] > 0 or position.retries >= self.config.train.flat_fold_retries:
            return False
        position.retries += 1
        log.warning("flat fold: training its epochs again", fold=fold.index, epoch=epoch, retry=position.retries,
                    meaning="the last epoch's greedy policy made no trade on validation (docs/learner.md, "
                    "'Retrying a flat fold')")
        return True

    def _train_epoch(self, fold: Fold, epoch: int, epochs: int, position: resume.Position, progress: RunProgress,
                     burn_in: bool = False) -> tuple[dict[str, float], dict[str, float]]:
        """The training half of an epoch, the same for a burn-in epoch and the fold's own: a fresh window,
        collection and updates, the fault check, the ``EPOCH`` kernels, then the encoder's slots (before the
        monitors read them). Returns the epoch's timings and the encoder's diagnostics for the metrics row.
        Schedules and the replay's warm-up count ``epoch`` modulo ``epochs``: a flat-fold retry starts them again."""
        self._start_window()
        self.isv.write(PROGRESS, (epoch % epochs) / epochs)
        stats = self._collect_and_learn(epoch % epochs, progress)
        self._stop_on_fault(fold.index, epoch, position, burn_in=burn_in)
        self._run_kernels(KernelPoint.EPOCH)
        return stats, self.learner.encoder_epoch(self.data.features.names, self.data.features.groups)

    def _plateau_recovery(self, fold: Fold, epoch: int, score: float, validation: dict[str, float],
                          is_best: bool) -> dict[str, Any] | None:
        """``[train.recovery]``: the epoch's ``recovery`` record (None when off). When a recovery is due, the fold's
        best policy is saved first if this epoch is it, then the learner is rewound and perturbed."""
        if self.recovery is None:
            return None
        record = self.recovery.observe(epoch, score)
        if record.pop("pending"):
            if is_best:
                resume.save_policy(self, fold, epoch, validation)
            record.update(self.recovery.recover(epoch))
            log.info("plateau recovery", epoch=epoch, rewound_to=record["rewound_to"], number=record["number"])
        return record

    def _stop_on_fault(self, fold: int, epoch: int, position: resume.Position, burn_in: bool = False) -> None:
        """A non-finite value this epoch ends the run: the last good checkpoints stay, summary.json names it
        (``burn_in``: the epoch is one of ``[train] burn_in_epochs``, not the fold's own epoch of that number)."""
        source = self.fault_checks.first()
        if source is None:
            return
        where = f"fold {fold}, {'burn-in ' if burn_in else ''}epoch {epoch}"
        # an epoch of this run had finished (and written its checkpoints) unless this is its first epoch
        finished_one = bool(position.results) or position.epoch > 0
        kept = ("the checkpoints of the last good epoch are kept" if finished_one
                else "no epoch had finished, so no checkpoint was written")
        message = (
            f"training produced a non-finite value (NaN or infinity) in {where}; the first came "
            f"from {source}. The run is stopped: {kept}, and summary.json "
            "names the fault. A lower learner.lr, tighter learner.budgets or a fix of that component usually cures it"
        )
        log.error("numerical fault", source=source, fold=fold, epoch=epoch, burn_in=burn_in)
        summary = self._summary(position.results)
        summary["fault"] = {"source": source, "fold": fold, "epoch": epoch, "burn_in": burn_in, "message": message}
        self.run_dir.write_json("summary.json", summary)
        raise NumericalFault(message, source, fold, epoch)

    def _stop_out_of_band(self, fold: int, epoch: int, row: dict[str, Any], position: resume.Position) -> None:
        """A metric out of its regression band for ``patience`` epochs (or not finite) ends the run as a fault
        does: this epoch's checkpoints stay, summary.json records the band (docs/bands.md)."""
        breach = self.band_watch.check(fold, epoch, row) if self.band_watch is not None else None
        if breach is None:
            return
        log.error("out of band: stopping", metric=breach.metric, value=breach.value, low=breach.low,
                  high=breach.high, fold=fold, epoch=epoch, reason=breach.reason)
        summary = self._summary(position.results)
        summary["bands"] = breach.record()
        self.run_dir.write_json("summary.json", summary)
        raise BandStop(breach.message, breach.record())

    def _save_resume(self, position: resume.Position) -> None:
        started = time.perf_counter()
        path = resume.save(self, position)
        log.debug("resume checkpoint written", checkpoint=str(path), fold=position.fold, next_epoch=position.epoch,
                  seconds=round(time.perf_counter() - started, 4))

    def _stop_requested(self) -> bool:
        return self.stop is not None and self.stop.requested

    def _stopped(self, position: resume.Position) -> bool:
        log.warning("stopped at a safe point", checkpoint=str(self.run_dir.checkpoint_dir(resume.RESUME_NAME)),
                    fold=position.fold, next_epoch=position.epoch)
        return False

    def _collect_and_learn(self, epoch: int, progress: RunProgress) -> dict[str, float]:
        """One epoch of experience: the plan's vector steps, each followed by its share of the updates, timed."""
        plan = self.plan
        self.action_counts.zero_()
        progress.epoch_started(plan.vector_steps)
        started = time.perf_counter()
        updates = 0
        for step in range(plan.vector_steps):
            count = plan.updates_after(epoch, step)
            self.train_step(count)
            updates += count
            if count and self.first_update_seconds is None:
                self._sync()
                self.first_update_seconds = time.perf_counter() - self.started
            progress.step_done()
        self._sync()  # the GPU runs ahead of Python: time the work, not its launches
        elapsed = max(time.perf_counter() - started, 1e-9)
        return {
            "env_steps_per_s": plan.env_steps / elapsed,
            "updates_per_s": updates / elapsed,
            "updates": updates,
            "seconds": elapsed,
        }

    def train_step(self, updates: int = 1) -> None:
        """The hot path: one vector step of every environment, then ``updates`` learner updates.

        No host-device synchronisation and no Python value that changes between
        calls (ε comes from the ISV as a device tensor), so on a GPU each half
        is captured once per fold as a CUDA graph and replayed
        (:class:`~foxhunt.trainer.graphs.StepGraphs`; ``tests_gpu/``).
        """
        self.graphs.collect()
        for _ in range(updates):
            self.graphs.update()

    def _collect(self) -> None:
        """Act, explore, step every environment, store the transitions."""
        actions = self.collect_pieces.act(self, self.obs)
        obs, reward, done = self.env.step(actions)
        self.fault_checks.after_env_step(reward)
        self.collect_pieces.store(self, actions, reward, obs, done)
        self.obs = obs  # the environment's own observation buffer: the same tensor every step

    def _act(self, obs: torch.Tensor) -> torch.Tensor:
        """Greedy values from the online network, then this run's exploration: actions ``[envs, Branch]``."""
        train = self.config.train
        # the bar each observation shows: an encoder window gathers from it, an auxiliary task's replay stores it
        bars = self.env.state[:, PS.BAR] if self.tracks_bars else None
        q = self.learner.act_values(obs, bars)
        per_branch = [q[:, b, :size] for b, size in enumerate(self.branch_sizes)]
        boost = self.recovery  # [train.recovery]: raised exploration for a few epochs after a recovery
        if train.exploration == "boltzmann":
            temperature = train.temperature if boost is None else boost.temperature(train.temperature)
            actions = self.explorer.boltzmann(per_branch, temperature)
        else:
            actions = self.explorer.epsilon_greedy(per_branch, self.epsilon if boost is None else boost.epsilon(self.epsilon))
        # The histogram by comparison and sum: an index_add_ into these few bins serialised on its atomics (76 µs,
        # a tenth of a collect step at 65,536 environments on an H200); the compiled step fuses this into one pass.
        slots = (actions + self.action_offsets).reshape(-1, 1)
        self.action_counts += (slots == self.action_bins).sum(0).to(torch.float32)
        self.prev_obs.copy_(obs)  # the env step overwrites obs in place: keep this step's for the replay
        if self.tracks_bars:
            self.prev_bars.copy_(bars)
        return actions

    def _store(self, actions: torch.Tensor, reward: torch.Tensor, obs: torch.Tensor, done: torch.Tensor) -> None:
        next_bars = self.env.state[:, PS.BAR] if self.windowed else None
        bars = self.prev_bars if self.tracks_bars else None
        # [learner] reward_split: the execution part of each reward, which the env writes beside it
        executions = self.env.state[:, PS.STEP_EXECUTION] if self.config.learner.reward_split else None
        self.learner.replay.add(self.prev_obs, actions, reward, obs, done, bars, next_bars, executions)
        self.step_counter.add_(1)

    def _update(self) -> None:
        """One learner update and the adaptive ``STEP`` kernels that follow it."""
        self.learner.step(self.config.learner.batch_size)
        self._run_kernels(KernelPoint.STEP)
        self.fault_checks.after_update()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _signals(self) -> dict[str, torch.Tensor]:
        """Every named device tensor kernels and monitors may read (docs/adaptive.md lists them)."""
        signals = dict(self.learner.signals)
        signals[contract.PORTFOLIO] = self.env.state
        signals.update(self.env.context.signals)
        return signals

    def _observe(self, fold: int, epoch: int) -> list[dict[str, Any]]:
        """Monitors observe read-only snapshots; one health_diag event and the Prometheus gauges."""
        names = [component.name for component in self.learner.components]
        labels = {contract.COMPONENT_GRAD_NORM: names, contract.COMPONENT_GRAD_NORM_CLIPPED: names}
        snapshots = epoch_diagnostics(
            self.monitors, self.isv, fold=fold, epoch=epoch, signals=self._signals(), labels=labels,
            exporter=self.exporter, logger=log,
        )
        return [snapshot.to_dict() for snapshot in snapshots]

    def _summary(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        market, config = self.data.market, self.config
        return evaluation.run_summary(config.data.source, market.content_hash(), config.run.seed,
                                      config.train.validation_metric, results, market.instrument.bars_per_year)

    # -- resumable state (the learner, environment and explorer hold theirs; trainer/resume.py composes them) --
    def state_dict(self) -> dict[str, torch.Tensor]:
        """The trainer's own resumable state (live): the ISV and the step counter the kernels read."""
        return {"isv": self.isv.tensor, "step_counter": self.step_counter}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Copy :meth:`state_dict` output in place (kernels keep their addresses), every entry checked first."""
        load_in_place(self.state_dict(), state, "trainer state", "it was saved with another plugin set")
