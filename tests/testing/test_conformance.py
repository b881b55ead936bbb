"""The conformance machine: it passes a well-formed plugin and the built-ins, and refuses each broken variant
with the message its author needs."""

from __future__ import annotations

import unittest

import pytest
from hypothesis import HealthCheck, Phase, settings

import fake_plugins
from foxhunt.errors import PluginError
from foxhunt.config import load_config
from foxhunt.testing import check_plugin, conformance_machine
from foxhunt_plugins.adaptive import tau
from foxhunt_plugins.losses import iql, mse

# Derandomized so the suite is reproducible. A well-formed plugin runs a few examples; a broken variant
# gets enough examples for its failing sequence to come up, and stops at the first failure (no shrinking:
# it would only repeat the same failure more slowly).
QUICK = settings(max_examples=4, stateful_step_count=6, deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])
FIND = settings(QUICK, max_examples=40, phases=[Phase.explicit, Phase.generate])


def run_case(case: type) -> str:
    """Run a conformance TestCase; return the text of its failures and errors ("" when it passed)."""
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(case).run(result)
    return "\n".join(text for _, text in result.failures + result.errors)


def test_a_well_formed_plugin_passes():
    assert run_case(conformance_machine(fake_plugins.good_plugin(), "toy", test_settings=QUICK)) == ""


@pytest.mark.parametrize(("plugin", "name"), [(mse, "mse"), (tau, "tau")])
def test_builtin_plugins_pass(plugin, name):
    assert run_case(conformance_machine(plugin, name, test_settings=QUICK)) == ""


def test_the_opt_in_iql_plugin_passes_switched_on():
    """Its floor slot, its state entry and the learner's state-value head, through resets and checkpoints."""
    enabled = load_config(None, ["plugins.iql.enabled=true"])
    assert run_case(conformance_machine(iql, "iql", enabled, test_settings=QUICK)) == ""


def test_slot_without_reset_entry_is_refused_naming_the_slot_and_the_fix():
    with pytest.raises(PluginError) as refused:
        check_plugin(fake_plugins.slot_without_reset_entry(), "orphan")
    message = str(refused.value)
    assert "[orphan from (in-process) 0]" in message
    assert "ISV slot 'toy.orphan' has no state-reset entry; add registrar.state('toy.orphan', '<category>')" in message
    failures = run_case(conformance_machine(fake_plugins.slot_without_reset_entry(), "orphan", test_settings=FIND))
    assert "ISV slot 'toy.orphan' has no state-reset entry" in failures


def test_misspelled_hook_is_refused_with_the_likely_name():
    with pytest.raises(PluginError) as refused:
        check_plugin(fake_plugins.misspelled_hook(), "typo")
    assert "unknown hook 'foxhunt_delcare': no such hookspec (did you mean 'foxhunt_declare'?)" in str(refused.value)
    failures = run_case(conformance_machine(fake_plugins.misspelled_hook(), "typo", test_settings=FIND))
    assert "did you mean 'foxhunt_declare'?" in failures


def test_kernel_writing_an_undeclared_slot_is_caught():
    failures = run_case(conformance_machine(fake_plugins.stray_kernel_write(), "stray", test_settings=FIND))
    assert "kernel 'toy.count' wrote ISV slot(s) ['toy.level', 'toy.total'] not in its writes=['toy.counter']" in failures


def test_monitor_that_writes_the_isv_is_caught():
    failures = run_case(conformance_machine(fake_plugins.writing_monitor(), "writer", test_settings=FIND))
    assert "the ISV changed while monitors observed it; monitors are read-only (invariant 8)" in failures


def test_fold_reset_that_misses_the_initial_value_is_caught():
    failures = run_case(conformance_machine(fake_plugins.reset_that_forgets(), "forgets", test_settings=FIND))
    assert "slots, ['toy.counter'] are not back to their init" in failures


def test_window_reset_that_misses_the_initial_value_is_caught():
    failures = run_case(conformance_machine(fake_plugins.window_reset_that_forgets(), "window", test_settings=FIND))
    assert "after the reset of window-reset slots, ['toy.window'] are not back to their init" in failures


def test_reset_that_touches_persist_state_is_caught():
    failures = run_case(conformance_machine(fake_plugins.reset_that_touches_persist(), "touches", test_settings=FIND))
    assert "a reset changed training-persist/schema-contract slot(s) ['toy.total']" in failures
