"""Import contracts: the core never imports a plugin module; plugins never import each other; built-in plugins
import only the public API (the root package and foxhunt.contract, with the exceptions ``.importlinter`` lists).

Two mechanisms, on purpose. ``lint-imports`` (import-linter, config in
``.importlinter``) checks the static contracts over the whole import graph,
indirect imports included. The ``ast`` checks here cover what a static config
cannot name: every module of the ``foxhunt.plugins`` entry-point group that is
installed *now* (third-party ones included), and new top-level plugin modules.
"""

from __future__ import annotations

import ast
import configparser
import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGE = "foxhunt_plugins"  # the built-ins' package, in the folder of the same name


def imported_modules(source: str) -> list[tuple[int, tuple[str, ...]]]:
    """Per import statement, ``(line, names)``: what it may import (``from a import b`` may mean ``a`` or ``a.b``).

    ``importlib.import_module("literal")`` counts as an import too.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, (alias.name,)) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, (node.module, *(f"{node.module}.{alias.name}" for alias in node.names))))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, (node.args[0].value,)))
    return found


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def plugin_modules() -> set[str]:
    """The module of every installed ``foxhunt.plugins`` entry point."""
    return {ep.module for ep in metadata.entry_points(group="foxhunt.plugins")}


def core_violations(path: str, source: str, forbidden: set[str]) -> list[str]:
    return [
        f"{path}:{line}: the core imports plugin module {hit!r}; load plugins through the entry-point group"
        for line, names in imported_modules(source)
        for hit in [next((n for n in names if any(within(n, f) for f in forbidden)), None)]
        if hit is not None
    ]


def plugin_violations(path: Path, source: str, plugins: set[str]) -> list[str]:
    """Imports of another top-level plugin module, or of another plugin's (entry-point) module."""
    relative = path.relative_to(ROOT / PLUGIN_PACKAGE).with_suffix("")
    parts = [p for p in relative.parts if p != "__init__"]
    own_module = ".".join([PLUGIN_PACKAGE, *parts])
    own_top = ".".join([PLUGIN_PACKAGE, *parts[:1]])
    found = []
    others = [other for other in plugins if other != own_module and not within(own_module, other)]
    for line, names in imported_modules(source):
        module = names[0]
        if within(module, PLUGIN_PACKAGE) and module != PLUGIN_PACKAGE and not within(module, own_top):
            found.append(f"{path}:{line}: plugin module {own_module} imports {module}, another plugin")
        elif hit := next((n for n in names if any(within(n, other) for other in others)), None):
            found.append(f"{path}:{line}: plugin module {own_module} imports {hit}, another plugin's module")
    return found


def forbidden_for_core() -> set[str]:
    forbidden = {PLUGIN_PACKAGE}
    for module in plugin_modules():
        top = module.split(".")[0]
        forbidden.add(module if top == "foxhunt" else top)  # a third-party plugin's whole package
    return forbidden


def test_core_never_imports_a_plugin_module():
    forbidden = forbidden_for_core()
    problems = []
    for path in sorted((ROOT / "foxhunt").rglob("*.py")):
        problems += core_violations(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"), forbidden)
    assert problems == []


def test_plugins_never_import_each_other():
    plugins = plugin_modules()
    problems = []
    for path in sorted((ROOT / PLUGIN_PACKAGE).rglob("*.py")):
        problems += plugin_violations(path, path.read_text(encoding="utf-8"), plugins)
    assert problems == []


def test_the_checks_catch_what_they_forbid():
    bad_core = "import foxhunt_plugins.losses.mse\nfrom foxhunt_huber import loss\nimportlib.import_module('foxhunt_plugins.tau')\n"
    assert len(core_violations("foxhunt/x.py", bad_core, {"foxhunt_plugins", "foxhunt_huber"})) == 3
    plugins = {"foxhunt_plugins.losses.c51", "foxhunt_plugins.losses.mse", "foxhunt_plugins.adaptive.tau"}
    c51 = ROOT / PLUGIN_PACKAGE / "losses" / "c51.py"
    assert plugin_violations(c51, "from foxhunt_plugins.losses import mse\n", plugins)  # a sibling plugin
    assert plugin_violations(c51, "from foxhunt_plugins.adaptive.common import clamp\n", plugins)  # another top level
    tau = ROOT / PLUGIN_PACKAGE / "adaptive" / "tau.py"
    assert plugin_violations(tau, "from foxhunt_plugins.adaptive.common import clamp\n", plugins) == []  # own package


def test_import_linter_contracts_are_kept():
    command = shutil.which("lint-imports")
    if command is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]' (import-linter is a test dependency)")
    # The caller's PYTHONPATH stays after the checkout: a worktree may put its own foxhunt_plugins/ there as foxhunt_plugins.
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([command, str(ROOT / ".importlinter")], cwd=ROOT, capture_output=True,
                            text=True, env={"PYTHONPATH": python_path, "PATH": str(Path(sys.executable).parent)})
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_public_api_contract_forbids_every_core_module_but_the_contract():
    """New core modules are internal by default: the plugins-public-api contract must list each of them."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter", encoding="utf-8")
    forbidden = set(parser["importlinter:contract:plugins-public-api"]["forbidden_modules"].split())
    core = {f"foxhunt.{path.stem if path.is_file() else path.name}" for path in (ROOT / "foxhunt").iterdir()
            if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()}
    assert forbidden == core - {"foxhunt.contract"}


@pytest.mark.parametrize("package", ["foxhunt.data", "foxhunt.env", "foxhunt.features", "foxhunt.kernels",
                                     "foxhunt.learner", "foxhunt.trainer", "foxhunt.tune",
                                     "foxhunt.sweep", "foxhunt.plugin.host", "foxhunt.monitoring.epoch_diagnostics",
                                     "foxhunt.tooling.audit"])
def test_every_package_imports_first_in_a_fresh_interpreter(package: str) -> None:
    # a circular import between packages shows only when the cycle's far end is imported first
    done = subprocess.run([sys.executable, "-c", f"import {package}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
