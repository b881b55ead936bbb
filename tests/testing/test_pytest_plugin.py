"""The kit's pytest plugin: its fixtures work in a plugin author's test session, and loading it is light."""

from __future__ import annotations

import importlib.metadata as metadata
import subprocess
import sys
import textwrap

PLUGIN_MODULE = "foxhunt.testing.pytest_plugin"

AUTHOR_TESTS = '''
import types

from foxhunt import LossComponent, hookimpl


def make_plugin():
    @hookimpl
    def foxhunt_loss_components(config):
        return [LossComponent("mine", 1.0, lambda inputs: inputs, "a plugin author's loss")]

    module = types.ModuleType("my_plugin")
    module.foxhunt_loss_components = foxhunt_loss_components
    return module


def test_plugin_host_has_discovery_off(plugin_host):
    # Only the core's own declarations: installed plugins (the built-ins, the Huber example) stay out.
    assert all(info.distribution == "foxhunt" for info in plugin_host.plugins.values())
    assert "mse" not in plugin_host.plugins


def test_add_plugin_registers_one_plugin_named_after_its_module(add_plugin):
    host = add_plugin(make_plugin())
    assert host.plugins["my_plugin"].status == "loaded"
    host.declare()
    host.freeze()
    assert [c.name for c in host.loss_components(None)] == ["mine"]


def test_add_plugin_takes_an_explicit_name(add_plugin, plugin_host):
    assert add_plugin(make_plugin(), "renamed") is plugin_host
    assert "renamed" in plugin_host.plugins
'''


def registered_by_entry_point() -> bool:
    return any(ep.value == PLUGIN_MODULE for ep in metadata.entry_points(group="pytest11"))


def test_fixtures_work_in_a_plugin_authors_session(tmp_path):
    (tmp_path / "test_author.py").write_text(textwrap.dedent(AUTHOR_TESTS), encoding="utf-8")
    # Installed foxhunt registers the plugin through its pytest11 entry point; a bare checkout loads it by name.
    load = [] if registered_by_entry_point() else ["-p", PLUGIN_MODULE]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load, str(tmp_path / "test_author.py")],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


def test_loading_the_plugin_imports_neither_numba_nor_hypothesis():
    # A conftest must still be able to switch on numba's CUDA simulator after pytest loaded this plugin.
    probe = f"import sys, {PLUGIN_MODULE}; print('numba' in sys.modules, 'hypothesis' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]
