"""A kernel that writes outside its declared slots is refused before training: each kernel runs once on a scratch ISV."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
from trainer_testkit import TINY, TINY_DATA, _private_feature_cache, invoke, train_args  # noqa: F401 - a fixture

from foxhunt import Kernel, PluginHost, contract, hookimpl
from foxhunt.errors import PluginError
from foxhunt.plugin.foreign_writes import changed_slots, refuse_foreign_writes, slot_bits
from foxhunt.isv import FINGERPRINT_SLOT, ISV
from foxhunt.kernels import Backend, KernelContext
from foxhunt.plugin.records import KernelPoint

INTRUDER_SLOT = "intruder.value"


def intruder_plugin(target: str) -> types.ModuleType:
    """An out-of-tree-style plugin: declares its own slot, says its kernel writes it, but writes ``target``."""
    module = types.ModuleType("foxhunt_intruder")

    def foxhunt_declare(registrar) -> None:
        registrar.slot(INTRUDER_SLOT, doc="the slot the kernel says it writes")
        registrar.state(INTRUDER_SLOT, "fold-reset")

    def write(context) -> None:
        context.isv_slot(target).fill_(0.25)  # in place, like a device kernel; init of tau.value is 0.005

    def foxhunt_kernels():
        return [Kernel("intruder.update", KernelPoint.STEP, write, "writes a slot it does not own",
                       writes=[INTRUDER_SLOT])]

    module.foxhunt_declare = hookimpl(foxhunt_declare)
    module.foxhunt_kernels = hookimpl(foxhunt_kernels)
    return module


def with_intruder(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """Every host the run builds discovers the installed plugins and then the intruder, as if it were installed."""
    discover = PluginHost.discover

    def discover_with_intruder(self: PluginHost) -> PluginHost:
        discover(self)
        self.add_plugin(intruder_plugin(target), "intruder", distribution="foxhunt-intruder", version="0.3.1")
        return self

    monkeypatch.setattr(PluginHost, "discover", discover_with_intruder)


def test_a_run_refuses_a_kernel_that_writes_another_plugins_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _private_feature_cache: Path
) -> None:
    with_intruder(monkeypatch, contract.TAU)
    result = invoke(*train_args(tmp_path / "run"))
    assert result.exit_code == 2, result.output + result.stderr
    assert "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "[intruder from foxhunt-intruder 0.3.1] kernel 'intruder.update' (step) wrote ISV slot(s) 'tau.value' " \
           "(declared by plugin 'tau') outside its writes=['intruder.value']" in message
    assert "read that slot instead of writing it, or declare a slot of your own" in message
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # refused before the first epoch


def test_a_kernel_writing_only_its_own_slot_passes_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _private_feature_cache: Path
) -> None:
    with_intruder(monkeypatch, INTRUDER_SLOT)
    overrides = [*TINY, "folds.n_folds=1", "train.epochs=1"]
    result = invoke(*train_args(tmp_path / "run", overrides, TINY_DATA))
    assert result.exit_code == 0, result.output + result.stderr


def _context(layout, signals=None) -> KernelContext:
    isv = ISV(layout)
    return KernelContext("cpu", Backend.CPU, isv.tensor, layout, signals or {"learner.q_mean": torch.ones(4)},
                         torch.zeros(1, dtype=torch.int64))


def _frozen_layout():
    host = PluginHost()
    host.add_core()
    host.add_plugin(intruder_plugin(INTRUDER_SLOT), "intruder", distribution="foxhunt-intruder", version="0.3.1")
    return host, host.declare().freeze().layout


def test_the_check_leaves_the_runs_own_tensors_untouched() -> None:
    host, layout = _frozen_layout()
    context = _context(layout)
    isv_before = slot_bits(context.isv, layout)
    signal_before = context.signals["learner.q_mean"].clone()

    def scribble(scratch) -> None:
        scratch.isv_slot(INTRUDER_SLOT).fill_(3.0)
        scratch.signals["learner.q_mean"].fill_(-1.0)
        scratch.step.add_(5)

    kernel = Kernel("intruder.scribble", KernelPoint.STEP, scribble, "writes its slot, a signal and the counter",
                    writes=[INTRUDER_SLOT])
    seconds = refuse_foreign_writes([kernel], {kernel.name: host.plugins["intruder"]}, context)
    assert seconds >= 0.0
    assert changed_slots(isv_before, slot_bits(context.isv, layout)) == []
    assert torch.equal(context.signals["learner.q_mean"], signal_before)
    assert context.step.item() == 0


def test_a_kernel_that_raises_on_the_scratch_run_is_a_plugin_problem() -> None:
    host, layout = _frozen_layout()

    def broken(scratch) -> None:
        scratch.signal("learner.nothing")

    kernel = Kernel("intruder.broken", KernelPoint.FOLD, broken, "reads a signal nobody provides")
    with pytest.raises(PluginError) as caught:
        refuse_foreign_writes([kernel], {kernel.name: host.plugins["intruder"]}, _context(layout))
    (problem,) = caught.value.problems
    assert (problem.plugin, problem.distribution, problem.version) == ("intruder", "foxhunt-intruder", "0.3.1")
    assert "kernel 'intruder.broken' (fold) raised KeyError" in problem.message
    assert "learner.nothing" in problem.message


def test_writing_the_fingerprint_lanes_is_a_foreign_write() -> None:
    host, layout = _frozen_layout()

    def stamp(scratch) -> None:
        scratch.isv_slot(FINGERPRINT_SLOT).fill_(1.0)

    kernel = Kernel("intruder.stamp", KernelPoint.EPOCH, stamp, "overwrites the layout fingerprint", writes=[INTRUDER_SLOT])
    with pytest.raises(PluginError, match=rf"'{FINGERPRINT_SLOT}' \(declared by plugin 'foxhunt'\)"):
        refuse_foreign_writes([kernel], {kernel.name: host.plugins["intruder"]}, _context(layout))
