"""A small run of the adaptive plugins for tests: host, layout, ISV, kernels, monitors, random signals."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import attrs
import numpy as np
import torch

from foxhunt.plugin import core_declarations
from foxhunt.actions import Branch
from foxhunt.contract import AtomKnot
from foxhunt.isv import ISV
from foxhunt.kernels import Backend, KernelContext, simulator_enabled
from foxhunt.monitoring.monitors import attach_monitors
from foxhunt.plugin.host import PluginHost
from foxhunt.plugin.records import Kernel, KernelPoint

__all__ = ["MECHANISMS", "BACKENDS", "Run", "build_run", "random_signals", "randomize_isv", "isv_array", "changed_slots"]

MECHANISMS = ("health", "tau", "gamma", "epsilon", "support", "grad_balance", "static")
N_BRANCHES = len(Branch)


def _backends() -> list[tuple[Backend, str]]:
    found = [(Backend.CPU, "cpu")]
    if simulator_enabled():
        found.append((Backend.CUDASIM, "cpu"))
    elif torch.cuda.is_available():
        found.append((Backend.CUDA, "cuda"))
    return found


BACKENDS = _backends()


def plugin_modules(names: Iterable[str] = MECHANISMS, diagnostics: bool = True) -> dict[str, ModuleType]:
    modules = {name: importlib.import_module(f"foxhunt_plugins.adaptive.{name}") for name in names}
    if diagnostics:
        modules["diagnostics"] = importlib.import_module("foxhunt_plugins.diagnostics")
    return modules


@attrs.define
class Run:
    host: PluginHost
    isv: ISV
    kernels: dict[str, Kernel]
    monitors: list[Any]
    step: torch.Tensor  # the trainer's vector-step counter, int64 [1]

    @property
    def layout(self):
        return self.isv.layout

    @property
    def registry(self):
        return self.host.registries.state

    def context(self, backend: Backend, device: str, signals: dict[str, torch.Tensor]) -> KernelContext:
        return KernelContext(device, backend, isv=self.isv.tensor, layout=self.layout, signals=signals, step=self.step)

    def points(self, point: KernelPoint) -> list[Kernel]:
        return [k for k in self.kernels.values() if k.point is point]


def build_run(names: Iterable[str] = MECHANISMS, config: Any = None, device: str = "cpu", diagnostics: bool = True) -> Run:
    """The plugins ``names`` on a host; their settings come from ``config``'s ``[plugins.<name>]`` tables."""
    host = PluginHost(getattr(config, "plugins", None))
    # the trainer's own slots, without the rest of the core (the learner's state needs a live learner)
    host.add_plugin(core_declarations, core_declarations.CORE_PLUGIN_NAME)
    for name, module in plugin_modules(names, diagnostics).items():
        host.add_plugin(module, name)
    host.declare()
    registries = host.freeze()
    isv = ISV(registries.layout, device)
    registries.state.attach_isv(isv)
    kernels = {kernel.name: kernel for kernel in host.kernels(config)}
    monitors = host.monitors(config)
    attach_monitors(registries.state, monitors)
    return Run(host, isv, kernels, monitors, torch.zeros(1, dtype=torch.int64, device=device))


def random_signals(rng: np.random.Generator, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Every signal an adaptive kernel or diagnostics monitor reads, with plausible random values."""

    def t(values: np.ndarray, dtype=torch.float32) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    components = 3
    return {
        "learner.q_gap": t(rng.exponential(0.1, N_BRANCHES)),
        "learner.q_mean": t(rng.normal(0.0, 3.0, N_BRANCHES)),
        "learner.q_std": t(rng.exponential(1.0, N_BRANCHES)),
        # sorted along the knots, as batch quantiles are
        "learner.return_quantiles": t(np.sort(rng.normal(0.0, 3.0, (N_BRANCHES, AtomKnot.size())), axis=1)),
        # large enough that some steps hit knot_max_step and some knots the neighbour or the +1 bound
        "learner.knot_gradient": t(rng.normal(0.0, 0.05, (N_BRANCHES, AtomKnot.size()))),
        "learner.greedy_share": t(rng.uniform(0.3, 1.0, N_BRANCHES)),
        "learner.grad_norm": t(rng.exponential(2.0, 1)),
        "learner.loss": t(rng.normal(1.0, 0.5, ())),
        "learner.branch_grad_norm": t(rng.exponential(1.0, N_BRANCHES) + 1e-3),
        "learner.component_grad_norm": t(rng.exponential(1.0, components)),
        "learner.component_grad_norm_clipped": t(rng.exponential(1.0, components)),
        "learner.safety_clips": torch.zeros((), dtype=torch.int64, device=device),
    }


def randomize_isv(run: Run, rng: np.random.Generator) -> None:
    """Plausible random values in every adaptive slot, the trainer's progress slots and step counter (not the fingerprint)."""
    run.step.fill_(int(rng.integers(0, 5000)))
    values = {
        "epsilon.fold_start": float(rng.integers(0, 5000)),
        "train.progress": rng.uniform(0.0, 1.0),
        "health.value": rng.uniform(0.0, 1.0),
        "health.count": float(rng.integers(0, 4)),
        "health.grad_fast": rng.exponential(2.0),
        "health.grad_slow": rng.exponential(2.0),
        "health.loss_fast": rng.normal(1.0, 0.5),
        "health.loss_slow": rng.normal(1.0, 0.5),
        "health.q_mean_ema": rng.normal(0.0, 3.0, N_BRANCHES),
        "support.center": rng.normal(0.0, 3.0, N_BRANCHES),
        "support.half_width": rng.uniform(0.5, 20.0, N_BRANCHES),
        # offsets whose knots (even places + offsets) are sorted in each branch's row
        "support.knots": np.sort(rng.uniform(-0.5, 0.5, (N_BRANCHES, AtomKnot.size())), axis=1).ravel() * 0.2,
        "grad_balance.scale": rng.uniform(0.3, 3.0, N_BRANCHES),
    }
    for name, value in values.items():
        if name in run.layout.offsets:
            run.isv.write(name, torch.as_tensor(value, dtype=torch.float32))


def isv_array(run: Run) -> np.ndarray:
    return run.isv.tensor.detach().cpu().numpy().copy()


def changed_slots(layout, before: np.ndarray, after: np.ndarray) -> set[str]:
    """Slots whose bits differ (NaN-safe: compares the raw float32 bits)."""
    b, a = before.view(np.uint32), after.view(np.uint32)
    return {slot.name for slot in layout.slots if not np.array_equal(b[layout.span(slot.name)], a[layout.span(slot.name)])}
