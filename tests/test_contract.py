"""foxhunt.contract: the one spelling of every shared name, and the reads checked against it.

The docs generated from it: tests/tooling/test_contract_docs.py."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest
import torch

from foxhunt import AdaptiveMonitor, Kernel, LossComponent, PluginHost, contract, hookimpl
from foxhunt.config import FoxhuntConfig
from foxhunt.errors import PluginError
from foxhunt.isv import FINGERPRINT_SLOT
from foxhunt.monitoring.monitors import MONITOR_STATE_PREFIX, reset_monitor
from foxhunt.plugin.records import KernelPoint

ROOT = Path(__file__).resolve().parents[1]


def test_the_builtin_plugins_declare_every_contract_slot_with_its_width_and_owner() -> None:
    host = PluginHost.builtin().discover().declare()
    layout = host.freeze().layout
    declared = {slot.name: (slot.width, slot.owner) for slot in layout.slots if slot.name != FINGERPRINT_SLOT}
    assert declared == {entry.name: (entry.width, entry.owner) for entry in contract.SLOTS}


def test_no_module_of_the_core_or_the_builtins_spells_a_shared_name_again() -> None:
    names = {entry.name for entry in contract.SHARED}
    found = []
    # The resume checkpoint's tensor keys are a file format named like the buffers they hold: renaming a signal
    # must not rename them, so they are spelt there on purpose.
    exempt = {ROOT / "foxhunt" / "contract.py", ROOT / "foxhunt" / "trainer" / "resume.py"}
    for path in [*sorted((ROOT / "foxhunt").rglob("*.py")), *sorted((ROOT / "foxhunt_plugins").rglob("*.py"))]:
        if path in exempt:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # A component may be named like the slot it writes (the epsilon plugin's FOLD kernel): a name, not a read.
        component_names = {id(keyword.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                           for keyword in node.keywords if keyword.arg == "name"}
        component_names |= {id(node.args[1]) for node in ast.walk(tree) if isinstance(node, ast.Call)
                            and getattr(node.func, "id", "") == "DualKernel" and len(node.args) > 1}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in component_names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == [], "use the foxhunt.contract constant instead:\n" + "\n".join(found)


def test_by_name_names_the_known_names_when_it_fails() -> None:
    assert contract.by_name(contract.HEALTH).owner == "health"
    with pytest.raises(KeyError, match="'health.valu' is not a shared name.*health.value"):
        contract.by_name("health.valu")


# -- reads are validated when the components are collected -----------------------------------
def reader_plugin(*, kernel_reads=(), optional=(), loss_reads=(), monitor_reads=(), monitor_signals=()) -> types.ModuleType:
    module = types.ModuleType("foxhunt_reader")

    def foxhunt_declare(registrar) -> None:
        registrar.slot("reader.value")
        registrar.state("reader.value", "fold-reset")
        registrar.state(MONITOR_STATE_PREFIX + "reader", "fold-reset", reset=reset_monitor)

    def foxhunt_kernels():
        return [Kernel("reader.update", KernelPoint.STEP, lambda context: None, "reads what the test says",
                       writes=["reader.value"], reads=kernel_reads, optional_reads=optional)]

    def foxhunt_loss_components():
        return [LossComponent("reader.loss", 1.0, lambda inputs: torch.zeros(()), "a loss", reads=loss_reads)]

    def foxhunt_monitors():
        monitor = AdaptiveMonitor("reader", monitor_reads)
        monitor.signals = tuple(monitor_signals)
        return [monitor]

    for name, function in [("foxhunt_declare", foxhunt_declare), ("foxhunt_kernels", foxhunt_kernels),
                           ("foxhunt_loss_components", foxhunt_loss_components), ("foxhunt_monitors", foxhunt_monitors)]:
        setattr(module, name, hookimpl(function))
    return module


def frozen_host(plugin: types.ModuleType) -> PluginHost:
    host = PluginHost()
    host.add_core()
    host.add_plugin(plugin, "reader", distribution="foxhunt-reader", version="0.2.0")
    host.declare().freeze()
    return host


def test_a_kernel_reading_a_slot_nobody_declares_is_refused_naming_plugin_and_name() -> None:
    host = frozen_host(reader_plugin(kernel_reads=[contract.HEALTH]))  # the health plugin is not loaded here
    with pytest.raises(PluginError) as caught:
        host.kernels(FoxhuntConfig())
    (problem,) = caught.value.problems
    assert (problem.plugin, problem.distribution, problem.version) == ("reader", "foxhunt-reader", "0.2.0")
    assert problem.message.startswith(
        "kernel 'reader.update' reads 'health.value', but no loaded plugin declares that ISV slot and the core "
        "provides no such signal")
    assert "load the plugin that declares it (it may be disabled in [plugins])" in problem.message
    assert "add it to optional_reads" in problem.message
    assert "[reader from foxhunt-reader 0.2.0]" in str(caught.value)


def test_a_misspelt_read_gets_the_close_name_suggested() -> None:
    host = frozen_host(reader_plugin(kernel_reads=["reader.valeu"]))
    with pytest.raises(PluginError, match="did you mean 'reader.value'"):
        host.kernels(FoxhuntConfig())


def test_an_optional_read_may_be_missing_and_declared_slots_and_signals_pass() -> None:
    host = frozen_host(reader_plugin(kernel_reads=[contract.HEALTH, contract.PROGRESS, contract.Q_MEAN, "reader.value"],
                                     optional=[contract.HEALTH]))
    assert [k.name for k in host.kernels(FoxhuntConfig())] == ["reader.update"]


def test_loss_and_monitor_reads_are_validated_too() -> None:
    host = frozen_host(reader_plugin(loss_reads=[contract.CQL_ALPHA]))
    with pytest.raises(PluginError, match="loss component 'reader.loss' reads 'cql.alpha'"):
        host.loss_components(FoxhuntConfig())
    host = frozen_host(reader_plugin(monitor_reads=["tau.value"], monitor_signals=["learner.q_men"]))
    with pytest.raises(PluginError) as caught:
        host.monitors(FoxhuntConfig())
    messages = [problem.message for problem in caught.value.problems]
    assert messages[0].startswith("monitor 'reader' reads 'tau.value'")
    assert messages[1].startswith("monitor 'reader' reads 'learner.q_men'") and "did you mean 'learner.q_mean'" in messages[1]


def test_an_optional_read_must_be_one_of_the_reads() -> None:
    with pytest.raises(ValueError, match=r"optional_reads \['health.value'\] are not in reads"):
        Kernel("x.update", KernelPoint.STEP, lambda context: None, "x", optional_reads=[contract.HEALTH])
