"""Multi-device training on one host (``foxhunt train --devices N``): process group, spawn, rank roles.

``[run] devices = N`` (N > 1) spawns N worker processes (``torch.multiprocessing.spawn``), rank ``r`` on
``cuda:r`` when the run's device is CUDA (backend NCCL), on the CPU otherwise (backend gloo). Each rank trains a
:class:`~foxhunt.trainer.distributed_trainer.DistributedTrainer`: its own vectorised environments and replay shard,
the same network (broadcast from rank 0), and one all-reduce of the combined gradient per update
(:class:`RankSync`). Rank 0 alone writes the run directory; the other ranks write their checkpoints into a
private scratch folder that is removed when the run ends. docs/multi-device.md gives every rule and why.

``devices = 1`` never comes here: ``foxhunt train`` builds the one-process :class:`~foxhunt.trainer.trainer.Trainer`
exactly as before.
"""

from __future__ import annotations

import faulthandler
import json
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
import structlog
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from foxhunt.config import FoxhuntConfig
from foxhunt.errors import FoxhuntError
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.run_lock import LOCK_FILE

__all__ = ["RankSync", "DistributedJob", "train_on_devices", "rank_seed", "backend_for", "record_fatal_errors",
           "RANK_SEED_STRIDE", "DEVICES_FILE", "FATAL_LINES"]

log = structlog.get_logger(__name__)

# Rank r's environments, exploration and replay draws use seed + r * stride (mod 2^64); rank 0 keeps the run's
# seed, so it starts on the single-process run's streams. The stride (2^64 / golden ratio) keeps the ranks of
# seed s off the streams of a run with seed s + 1.
RANK_SEED_STRIDE = 0x9E3779B97F4A7C15
DEVICES_FILE = "devices.json"  # rank 0 writes it at the end: how far the ranks' replicated state ended apart
_RESUME_DIR = "resume"


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank``'s own random streams (``seed`` itself for rank 0)."""
    return (seed + rank * RANK_SEED_STRIDE) % 2**64


def backend_for(device: torch.device) -> str:
    """NCCL between GPUs, gloo between CPU processes."""
    return "nccl" if device.type == "cuda" else "gloo"


class RankSync:
    """The collectives a rank takes part in; every rank calls them in the same order (the run is in lockstep)."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world

    @torch.no_grad()
    def mean_(self, *tensors: torch.Tensor) -> None:
        """Replace each floating tensor by its mean over the ranks, in place, with ONE all-reduce (sum, then / N)."""
        if len(tensors) == 1 and tensors[0].is_contiguous():
            dist.all_reduce(tensors[0], op=dist.ReduceOp.SUM)
            tensors[0].div_(self.world)
            return
        flat = torch.cat([t.reshape(-1) for t in tensors])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(self.world)
        offset = 0
        for tensor in tensors:
            tensor.copy_(flat[offset : offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()

    def gradients(self, learner: Any) -> None:
        """The learner's hook: its combined flat gradient (and a combiner's learned values' gradient) averaged."""
        extra = (learner.combiner_parameters.grad,) if learner.combiner.parameters_per_component else ()
        self.mean_(learner.gradients.flat_grad, *extra)

    def moments(self, mean: torch.Tensor, square: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """PopArt's hook: the batch moments averaged over the ranks (equal batches: the moments of the union)."""
        stacked = torch.stack([mean, square])
        self.mean_(stacked)
        return stacked[0], stacked[1]

    def broadcast_(self, *tensors: torch.Tensor) -> None:
        """Rank 0's values into every rank's tensors, in place."""
        for tensor in tensors:
            dist.broadcast(tensor, src=0)

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's ``value`` (picklable) on every rank; the others pass anything."""
        box = [value if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank when ``flag`` is true on any."""
        value = torch.tensor([1.0 if flag else 0.0], device=device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's ``tensor`` (same shape on all), in rank order, on every rank."""
        parts = [torch.empty_like(tensor) for _ in range(self.world)]
        dist.all_gather(parts, tensor.contiguous())
        return parts


@attrs.frozen
class DistributedJob:
    """What every spawned rank needs (picklable): the config, where to write, and how to meet the others."""

    config: FoxhuntConfig
    run_path: Path
    resume: bool
    init_method: str
    scratch: tuple[Path, ...]  # rank r > 0 writes into scratch[r - 1]
    error_dir: Path
    show_progress: bool = False
    metrics_port: int | None = None
    stop: Any = None  # a picklable object with ``.requested`` (tests); None: each rank's own Ctrl-C / SIGTERM flag

    @property
    def world(self) -> int:
        return self.config.run.devices


def _prepare_scratch(job_dir: Path, run_path: Path, world: int, resume: bool) -> tuple[Path, ...]:
    """One private run folder per rank > 0. On resume, a copy of the run's folder without its resume checkpoint
    (the rank reads that from the run itself) and its lock: the fold policies and metric lines a rank restores."""
    folders = []
    for rank in range(1, world):
        folder = job_dir / f"rank{rank}"
        if resume:
            shutil.copytree(run_path, folder, ignore=lambda directory, names: [
                name for name in names if name in (LOCK_FILE, _RESUME_DIR) or name.startswith(f".{_RESUME_DIR}")])
        folders.append(folder)
    return tuple(folders)


def train_on_devices(config: FoxhuntConfig, run_dir: RunDirectory, *, resume: bool, show_progress: bool = True,
                     metrics_port: int | None = None, stop: Any = None) -> dict[str, Any] | None:
    """Train ``config`` on ``config.run.devices`` ranks; the summary as :meth:`Trainer.run` returns it.

    ``run_dir`` was opened (and checked) by the caller: its lock is handed to rank 0, which opens the folder
    again. A rank's error ends every rank; it is raised here (the original exception when it can be rebuilt).
    """
    from foxhunt.trainer.trainer import resolve_device  # the trainer module is heavy; the CLI imports this lazily

    world = config.run.devices
    device = resolve_device(config.run.device)
    if device.type == "cuda" and torch.cuda.device_count() < world:
        raise FoxhuntError(f"run.devices = {world}, but torch sees {torch.cuda.device_count()} CUDA GPU(s); "
                           "set --devices to at most that number")
    run_path = run_dir.path
    run_dir.release()  # rank 0 takes the lock again as it opens the folder
    with tempfile.TemporaryDirectory(prefix="foxhunt-devices-") as tmp:
        job_dir = Path(tmp)
        (job_dir / "errors").mkdir()
        job = DistributedJob(config, run_path, resume, f"file://{job_dir / 'rendezvous'}",
                             _prepare_scratch(job_dir, run_path, world, resume), job_dir / "errors",
                             show_progress, metrics_port, stop)
        log.info("spawning ranks", devices=world, backend=backend_for(device))
        try:
            mp.spawn(_rank_main, args=(job,), nprocs=world, join=True)
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as error:
            raise _rank_error(job.error_dir, error) from None
    summary = run_path / "summary.json"
    return json.loads(summary.read_text(encoding="utf-8")) if summary.exists() else None


FATAL_LINES = 60  # the most lines of a rank's fatal-error traceback quoted in the parent's error


def record_fatal_errors(error_dir: Path, rank: int) -> None:
    """Have a fatal signal in this rank (SIGABRT from a native library, SIGSEGV) write every thread's Python
    traceback to ``error_dir/rank<r>.fault``: such a crash raises no exception to pickle, and spawn reports only the
    signal. The file stays open for the life of the process, as faulthandler needs."""
    faulthandler.enable(file=(error_dir / f"rank{rank}.fault").open("w", encoding="utf-8"), all_threads=True)


def _rank_error(error_dir: Path, error: Exception) -> BaseException:
    """The first failed rank's own exception (the others then fail in a collective), else a :class:`FoxhuntError`
    quoting the failure and, for a rank killed by a fatal signal, the traceback faulthandler wrote for it."""
    for path in sorted(error_dir.glob("rank*.pickle"), key=lambda p: p.stat().st_mtime_ns):  # the first to fail
        try:
            return pickle.loads(path.read_bytes())
        except Exception:  # noqa: BLE001 - an exception that cannot be rebuilt is quoted below instead
            continue
    message = f"a training rank failed: {error}"
    for path in sorted(error_dir.glob("rank*.fault")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if lines:
            shown = lines[-FATAL_LINES:]
            cut = f" (its last {FATAL_LINES} of {len(lines)} lines)" if len(lines) > FATAL_LINES else ""
            message += f"\n{path.stem} died on a fatal signal; its threads at that moment{cut}:\n" + "\n".join(shown)
    return FoxhuntError(message)


def _rank_main(rank: int, job: DistributedJob) -> None:
    """One rank: join the group, train, leave. Spawned by :func:`train_on_devices`."""
    from foxhunt.trainer.distributed_trainer import DistributedTrainer
    from foxhunt.trainer.interrupt import StopFlag
    from foxhunt.trainer.trainer import resolve_device

    config = job.config
    device = resolve_device(config.run.device)
    if device.type == "cuda":
        torch.cuda.set_device(rank)
    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    structlog.contextvars.bind_contextvars(rank=rank)
    record_fatal_errors(job.error_dir, rank)
    dist.init_process_group(backend_for(device), init_method=job.init_method, rank=rank, world_size=job.world)
    try:
        path = job.run_path if rank == 0 else job.scratch[rank - 1]
        run_dir = RunDirectory(path, resume=job.resume)
        with StopFlag() as flag:
            trainer = DistributedTrainer(
                config, run_dir, sync=RankSync(rank, job.world), stop=flag if job.stop is None else job.stop,
                show_progress=job.show_progress and rank == 0, metrics_port=job.metrics_port if rank == 0 else None,
            )
            trainer.run(resume_from=job.run_path if job.resume else None)
        # Every rank leaves together: a rank that tore its group down while another was still inside gloo killed
        # that one at exit ("terminate called without an active exception", then SIGABRT/SIGSEGV, seen in CI
        # after both had finished training). Only on success: after an error the others may never get here.
        dist.barrier()
    except BaseException as error:
        try:
            (job.error_dir / f"rank{rank}.pickle").write_bytes(pickle.dumps(error))
        except Exception:  # noqa: BLE001 - unpicklable: the parent quotes spawn's traceback instead
            pass
        raise
    finally:
        dist.destroy_process_group()
