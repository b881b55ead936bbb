"""One profile as data: the time of each phase of a training run, with the machine it ran on.

A phase is one part of the trainer's work (docs/profiling.md): ``collect`` (act,
explore, env step, replay insert: one vector step), ``update`` (one learner
update and the ``STEP`` kernels), ``validation`` (the greedy backtest of the
epoch boundary) and ``checkpoint`` (the resume checkpoint and the fold's policy
checkpoint written at the epoch boundary). Each is recorded as its number of
calls and their total wall seconds; comparisons use the seconds per call, so a
baseline recorded with more steps still compares.

The file is JSON (``--save-baseline``), readable by anything; :func:`load_profile`
refuses a file that is not one, naming what is wrong.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from foxhunt import __version__, durable
from foxhunt.errors import FoxhuntError

__all__ = ["PHASES", "FORMAT", "PhaseTime", "PhaseProfile", "machine_info", "save_profile", "load_profile"]

PHASES = ("collect", "update", "validation", "checkpoint")
FORMAT = 1  # the file's "foxhunt_profile" key: bumped when the layout changes


@attrs.frozen
class PhaseTime:
    """``calls`` of one phase took ``seconds`` of wall time together."""

    calls: int = attrs.field(validator=attrs.validators.ge(0))
    seconds: float = attrs.field(converter=float, validator=attrs.validators.ge(0.0))

    @property
    def per_call(self) -> float:
        """Mean wall seconds of one call (0 when the phase never ran)."""
        return self.seconds / self.calls if self.calls else 0.0

    def scaled(self, factor: float) -> PhaseTime:
        """The same calls, ``factor`` times slower (what a regression looks like)."""
        return PhaseTime(self.calls, self.seconds * factor)


@attrs.frozen
class PhaseProfile:
    """Per-phase times of one profiled run, the machine it ran on and what was run."""

    phases: Mapping[str, PhaseTime]
    machine: Mapping[str, Any] = attrs.Factory(dict)
    run: Mapping[str, Any] = attrs.Factory(dict)

    def with_phase(self, name: str, time: PhaseTime) -> PhaseProfile:
        return attrs.evolve(self, phases={**self.phases, name: time})

    def to_dict(self) -> dict[str, Any]:
        return {
            "foxhunt_profile": FORMAT,
            "machine": dict(self.machine),
            "run": dict(self.run),
            "phases": {
                name: {"calls": t.calls, "seconds": t.seconds, "per_call_seconds": t.per_call}
                for name, t in self.phases.items()
            },
        }


def machine_info(device: torch.device) -> dict[str, Any]:
    """What the times depend on: host, CPU, torch build and, on CUDA, the GPU."""
    info: dict[str, Any] = {
        "foxhunt": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device.type,
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info


def save_profile(path: Path, profile: PhaseProfile) -> None:
    """Write ``profile`` as JSON at ``path`` (replaced atomically; the folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    durable.write_bytes(path, (json.dumps(profile.to_dict(), indent=2, sort_keys=True) + "\n").encode("utf-8"))


def load_profile(path: Path) -> PhaseProfile:
    """The profile recorded at ``path`` by :func:`save_profile`; anything else is one :class:`FoxhuntError`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FoxhuntError(f"{path}: no such baseline file; record one with foxhunt profile --save-baseline {path}") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise FoxhuntError(f"{path}: not a foxhunt profile baseline (not JSON: {error})") from None
    if not isinstance(data, dict) or data.get("foxhunt_profile") != FORMAT:
        raise FoxhuntError(
            f"{path}: not a foxhunt profile baseline of format {FORMAT} (its 'foxhunt_profile' key is "
            f"{data.get('foxhunt_profile') if isinstance(data, dict) else None!r}); record it again with "
            f"foxhunt profile --save-baseline {path}"
        )
    phases = data.get("phases")
    if not isinstance(phases, dict):
        raise FoxhuntError(f"{path}: its 'phases' key is not a table of phase times")
    times = {}
    for name, entry in phases.items():
        try:
            times[name] = PhaseTime(int(entry["calls"]), float(entry["seconds"]))
        except (KeyError, TypeError, ValueError) as error:
            raise FoxhuntError(
                f"{path}: phase {name!r} needs whole 'calls' and non-negative 'seconds' ({type(error).__name__}: "
                f"{error})"
            ) from None
    return PhaseProfile(times, dict(data.get("machine") or {}), dict(data.get("run") or {}))
