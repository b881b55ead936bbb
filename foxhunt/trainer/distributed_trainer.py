"""One rank of a multi-device run: the :class:`~foxhunt.trainer.trainer.Trainer`, plus its rank's role.

What a rank adds to the one-process trainer, each a small override (docs/multi-device.md gives the rules):

* **its own streams**: rank ``r`` re-keys its environments, exploration and replay/τ draws with
  :func:`~foxhunt.trainer.distributed.rank_seed` (rank 0 keeps the run's seed), so ranks collect different
  transitions into their own replay shards;
* **one network**: every replicated tensor (online and target network, spectral vectors, PopArt, the combiner's
  learned values, the ISV) is broadcast from rank 0 after the build and after a resume restore;
* **one gradient**: the learner's ``gradient_sync`` hook averages the budgeted combination over the ranks (one
  all-reduce) before the optimiser step; PopArt's ``moments_sync`` averages the batch moments;
* **one ISV**: before the ``STEP`` kernels the learner's float signals are averaged over the ranks; after every
  kernel point rank 0's ISV is broadcast (rank 0 owns every slot);
* **rank 0 decides**: validation and test backtests run on rank 0 and their results are broadcast, so every
  rank takes the same best-epoch, recovery and stop decisions; a stop request on any rank stops all;
* **eager**: compiled pieces and CUDA graphs are turned off in the ranks (a collective inside a captured graph or
  a ``fullgraph`` compile is not supported here yet).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch

from foxhunt.env.tables import RNG
from foxhunt.env.vector import env_keys
from foxhunt.learner.update_pieces import EAGER_PIECES
from foxhunt.plugin.records import KernelPoint
from foxhunt.trainer import trainer as trainer_module
from foxhunt.trainer.collect_pieces import EAGER_COLLECT_PIECES
from foxhunt.trainer.distributed import DEVICES_FILE, RankSync, backend_for, rank_seed
from foxhunt.trainer.graphs import StepGraphs
from foxhunt.trainer.run_dir import RunDirectory

__all__ = ["DistributedTrainer", "RankZeroBacktests", "AgreedStop", "replicated_tensors"]

log = structlog.get_logger(__name__)


def replicated_tensors(trainer: trainer_module.Trainer) -> list[torch.Tensor]:
    """The live tensors every rank must hold identically: networks, spectral vectors, PopArt, the combiner's
    learned values and the ISV (replay, environments, RNGs and optimiser moments are not broadcast: the first
    three are the rank's own, the optimiser's follow from identical gradients)."""
    learner = trainer.learner
    tensors = [tensor for module in (learner.network, learner.target, learner.spectral, learner.popart)
               for tensor in module.state_dict(keep_vars=True).values()]
    tensors.append(learner.combiner_parameters)
    tensors.append(trainer.isv.tensor)
    return [tensor.data if isinstance(tensor, torch.nn.Parameter) else tensor for tensor in tensors]


class RankZeroBacktests:
    """A run's backtests run on rank 0 only; every rank gets rank 0's results (so all decide alike)."""

    def __init__(self, inner: Any, sync: RankSync) -> None:
        self.inner, self.sync = inner, sync

    def agent(self, act_values: Any, features: np.ndarray, window: tuple[int, int],
              device: torch.device | str = "cpu") -> Any:
        result = self.inner.agent(act_values, features, window, device) if self.sync.rank == 0 else None
        return self.sync.broadcast_object(result)

    def baselines(self, features: np.ndarray, window: tuple[int, int]) -> Any:
        result = self.inner.baselines(features, window) if self.sync.rank == 0 else None
        return self.sync.broadcast_object(result)


class AgreedStop:
    """A stop request on any rank is a stop request on every rank, at the same epoch boundary."""

    def __init__(self, inner: Any, sync: RankSync, device: torch.device) -> None:
        self.inner, self.sync, self.device = inner, sync, device

    @property
    def requested(self) -> bool:
        return self.sync.any(self.inner is not None and bool(self.inner.requested), self.device)


class DistributedTrainer(trainer_module.Trainer):
    """The trainer of one rank (spawned by :func:`foxhunt.trainer.distributed.train_on_devices`)."""

    def __init__(self, config: Any, run_dir: RunDirectory, *, sync: RankSync, **kwargs: Any) -> None:
        self.sync = sync  # first: the build's CONSTRUCT kernels already broadcast the ISV
        super().__init__(config, run_dir, **kwargs)
        self.stop = AgreedStop(self.stop, sync, self.device)
        self.seed = rank_seed(config.run.seed, sync.rank)

    # -- construction ----------------------------------------------------------------
    def _build(self) -> None:
        super()._build()
        if self.config.learner.compile or self.graphs.enabled:
            log.info("multi-device ranks run eager: learner.compile and run.cuda_graph are off in the ranks")
        self.learner.pieces = EAGER_PIECES
        self.collect_pieces = EAGER_COLLECT_PIECES
        self.graphs = StepGraphs(self._collect, self._update, enabled=False, update_generators=(self.learner.generator,))
        self.learner.gradient_sync = self.sync.gradients
        self.learner.popart.moments_sync = self.sync.moments
        self.backtests = RankZeroBacktests(self.backtests, self.sync)
        self._own_streams()
        self.sync.broadcast_(*replicated_tensors(self))
        log.info("rank ready", rank=self.sync.rank, devices=self.sync.world, backend=backend_for(self.device))

    def _own_streams(self) -> None:
        """Rank r > 0 re-keys its environments, exploration and learner generator (counters are kept)."""
        if self.sync.rank == 0:
            return
        keys = torch.from_numpy(env_keys(self.seed, self.config.env.n_envs)).to(self.device)
        self.env.rng[:, RNG.KEY] = keys
        self.explorer.reseed(self.seed)
        self.learner.generator.manual_seed(self.seed)

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """A resume restores rank 0's checkpoint on every rank (the trainer's part comes last): rank r > 0 then
        takes its own streams again, and the replicated state is broadcast."""
        super().load_state_dict(state)
        self._own_streams()
        self.sync.broadcast_(*replicated_tensors(self))

    # -- the step --------------------------------------------------------------------
    def _run_kernels(self, point: KernelPoint) -> None:
        """STEP kernels see the learner's signals averaged over the ranks; after any point, rank 0's ISV."""
        if point is KernelPoint.STEP:
            signals = [t for t in self.learner.signals.values() if t.is_floating_point()]
            self.sync.mean_(*signals)
        super()._run_kernels(point)
        self.sync.broadcast_(self.isv.tensor)

    def _plateau_recovery(self, fold: Any, epoch: int, score: float, validation: dict[str, float],
                          is_best: bool) -> dict[str, Any] | None:
        """Every rank decides alike (rank 0's validation score); the perturbation draws from each rank's own
        generator, so rank 0's rewound and perturbed state is broadcast after it."""
        record = super()._plateau_recovery(fold, epoch, score, validation, is_best)
        if record is not None and record.get("fired"):
            self.sync.broadcast_(*replicated_tensors(self))
        return record

    # -- the end ---------------------------------------------------------------------
    def _run(self, resume_from: Path | None) -> dict[str, Any] | None:
        summary = super()._run(resume_from)
        self._record_agreement()
        return summary

    def _record_agreement(self) -> None:
        """Rank 0 gathers every rank's replicated state and writes how far apart it ended (``devices.json``)."""
        flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in replicated_tensors(self)[:-1]])
        parts, isvs = self.sync.gather(flat), self.sync.gather(self.isv.tensor.detach().to(torch.float64))
        replay = [t for t in self.learner.replay.state_dict().values() if t.is_floating_point()]
        shard_sum = torch.stack([t.to(torch.float64).sum() for t in replay]).sum().reshape(1)
        shards = self.sync.gather(shard_sum)  # each rank's own transitions: the sums differ
        if self.sync.rank != 0:
            return
        record = {
            "devices": self.sync.world,
            "backend": backend_for(self.device),
            "max_parameter_difference": max(float((p - parts[0]).abs().max()) for p in parts),
            "max_isv_difference": max(float((v - isvs[0]).abs().max()) for v in isvs) if isvs[0].numel() else 0.0,
            "replay_shard_sums": [float(shard) for shard in shards],
            "rank_seeds": [rank_seed(self.config.run.seed, r) for r in range(self.sync.world)],
        }
        self.run_dir.write_json(DEVICES_FILE, record)
