"""The training step's numerical-fault checks (issue 14): what is checked, where, and under which name.

One :class:`foxhunt.faults.FaultFlag` per run. The environment's reward is
checked after every env step; after every learner update and its ``STEP``
kernels come each loss component's loss value, then its gradient norm, then
every ISV lane but the layout fingerprint's (whose lanes hold raw bits, not
numbers). The flag keeps the first fault, so the name read at the epoch
boundary is the first thing that went wrong, not what it poisoned later.
"""

from __future__ import annotations

import torch

from foxhunt.faults import FaultFlag
from foxhunt.isv import FINGERPRINT_SLOT, ISV
from foxhunt.learner import Learner

__all__ = ["StepFaultChecks"]


class StepFaultChecks:
    """Checks wired into ``Trainer._collect`` and ``Trainer._update``; ``first()`` is read once per epoch."""

    def __init__(self, learner: Learner, isv: ISV, env_kernel: str, device: torch.device) -> None:
        self.flag = FaultFlag(device)
        self.learner = learner
        self.isv = isv
        self.reward = self.flag.sources([f"reward written by the environment kernel {env_kernel}"])
        names = [component.name for component in learner.components]
        self.losses = self.flag.sources([f"loss component {name}: loss value" for name in names])
        self.gradients = self.flag.sources([f"loss component {name}: gradient" for name in names])
        lanes, lane_names = [], []
        for slot in isv.layout.slots:
            if slot.name == FINGERPRINT_SLOT:
                continue
            start = isv.layout.offset(slot.name)
            for lane in range(slot.width):
                lanes.append(start + lane)
                where = f"ISV slot {slot.name}" + (f"[{lane}]" if slot.width > 1 else "")
                lane_names.append(f"{where} (plugin {slot.owner})")
        self.isv_lanes = torch.tensor(lanes, dtype=torch.int64, device=device)
        self.isv_sources = self.flag.sources(lane_names) if lanes else None

    def after_env_step(self, reward: torch.Tensor) -> None:
        self.flag.check(self.reward, reward)

    def after_update(self) -> None:
        self.flag.check(self.losses, self.learner.loss_values)
        self.flag.check(self.gradients, self.learner.gradients.component_norms)
        if self.isv_sources is not None:
            self.flag.check(self.isv_sources, self.isv.tensor.index_select(0, self.isv_lanes))

    def first(self) -> str | None:
        """The first source of a non-finite value so far, or ``None`` (one host read)."""
        return self.flag.first()
