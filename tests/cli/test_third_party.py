"""A third-party plugin installed as a real distribution, seen by the CLI like any built-in.

The distribution is a ``.dist-info`` with ``METADATA`` and ``entry_points.txt``
plus its module, in a temporary directory: in-process it goes on ``sys.path``;
for the one real ``foxhunt`` subprocess (proof that the console script works)
it goes on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def thirdparty(dists) -> dict[str, tuple[str, str]]:
    return {"thirdparty": ("thirdparty_plugin", dists.THIRDPARTY_PLUGIN)}


def _by_name(plugins: list[dict]) -> dict[str, dict]:
    return {entry["name"]: entry for entry in plugins}


def test_plugins_list_shows_the_third_party_distribution(run, site: Path, dists, thirdparty) -> None:
    dists.write_distribution(site, "foxhunt-thirdparty", "1.2.3", thirdparty)
    result = run("plugins", "list", "--json")
    assert result.exit_code == 0
    entry = _by_name(json.loads(result.stdout))["thirdparty"]
    assert entry["distribution"] == "foxhunt-thirdparty"
    assert entry["version"] == "1.2.3"
    assert entry["status"] == "loaded"
    assert entry["hooks"] == ["foxhunt_declare", "foxhunt_loss_components"]
    assert entry["location"] == str(site / "thirdparty_plugin.py")


def test_third_party_slot_in_layout_and_inspect(run, site: Path, dists, thirdparty) -> None:
    dists.write_distribution(site, "foxhunt-thirdparty", "1.2.3", thirdparty)
    only = ("--set", 'plugins.only=["thirdparty"]')
    layout = json.loads(run("layout", "show", "--json", *only).stdout)
    (slot,) = [s for s in layout["slots"] if s["owner"] == "thirdparty"]
    assert (slot["name"], slot["width"], slot["init"]) == ("thirdparty.gain", 3, 0.5)
    inspect = run("plugins", "inspect", "thirdparty", *only)
    assert inspect.exit_code == 0
    assert "thirdparty  foxhunt-thirdparty 1.2.3  (loaded)" in inspect.stdout
    assert "thirdparty.gain [fold-reset] restarts every fold" in inspect.stdout
    assert "components: thirdparty.zero (loss)" in inspect.stdout


def test_third_party_plugin_never_changes_the_registry_snapshots(run, site: Path, tmp_path: Path, dists, thirdparty) -> None:
    run("registry", "lock", "--dir", str(tmp_path / "before"))
    dists.write_distribution(site, "foxhunt-thirdparty", "1.2.3", thirdparty)
    assert run("registry", "check", "--dir", str(tmp_path / "before")).exit_code == 0


def test_broken_plugin_is_listed_as_failed_but_stops_the_layout(run, site: Path, dists, thirdparty) -> None:
    dists.write_distribution(site, "foxhunt-typo", "0.0.1", {"typo": ("typo_plugin", dists.MISSPELLED_PLUGIN)})
    listed = run("plugins", "list", "--json")
    assert listed.exit_code == 0
    entry = _by_name(json.loads(listed.stdout))["typo"]
    assert (entry["status"], entry["error"]) == ("failed", "unknown hook(s): foxhunt_delcare")
    assert "warning: [typo from foxhunt-typo 0.0.1] unknown hook 'foxhunt_delcare'" in listed.stderr

    shown = run("layout", "show", "--json", "--set", 'plugins.only=["typo"]')
    assert shown.exit_code == 2
    assert shown.stdout == ""
    assert shown.stderr == (
        "error: 1 plugin problem(s) stop this run:\n"
        "  - [typo from foxhunt-typo 0.0.1] unknown hook 'foxhunt_delcare': no such hookspec "
        "(did you mean 'foxhunt_declare'?)\n"
        "Fix the plugins above (or disable them in [plugins] of the config) and run again.\n"
    )


BAD_CATEGORY = """
from foxhunt import hookimpl


@hookimpl
def foxhunt_declare(registrar):
    registrar.slot("category.value")
    registrar.state("category.value", "per-fold")
"""

SAME_SLOT = """
from foxhunt import hookimpl


@hookimpl
def foxhunt_declare(registrar):
    registrar.slot("shared.value")
    registrar.state("shared.value", "fold-reset")
"""

SETTINGS = """
import attrs
from foxhunt import hookimpl


@attrs.frozen
class Settings:
    strength: float = 0.5


@hookimpl
def foxhunt_declare(registrar):
    registrar.settings(Settings)
"""


def test_plugins_that_fail_when_they_declare_are_listed_as_failed_with_the_reason(run, site: Path, dists) -> None:
    dists.write_distribution(site, "foxhunt-declares", "0.2.0", {
        "category": ("category_plugin", BAD_CATEGORY),
        "left": ("left_plugin", SAME_SLOT),
        "right": ("right_plugin", SAME_SLOT),
        "tuned": ("tuned_plugin", SETTINGS),
    })
    listed = run("plugins", "list", "--json", "--set", 'plugins.tuned.strength="high"')
    assert listed.exit_code == 0
    entries = _by_name(json.loads(listed.stdout))
    assert {name: entries[name]["status"] for name in ("category", "left", "right", "tuned", "mse")} == {
        "category": "failed", "left": "failed", "right": "failed", "tuned": "failed", "mse": "loaded"}
    assert entries["category"]["error"].startswith("state entry 'category.value': unknown category 'per-fold'")
    assert "ISV slot 'shared.value' is" in entries["left"]["error"]
    assert "ISV slot 'shared.value' is" in entries["right"]["error"]
    assert entries["tuned"]["error"].startswith("plugins.tuned.strength: expected a number, got str 'high'")
    assert "warning: [tuned from foxhunt-declares 0.2.0] plugins.tuned.strength" in listed.stderr
    table = run("plugins", "list", "--set", 'plugins.tuned.strength="high"')
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("│ category ")]
    assert re.search(r"│ failed +│ .* │ state entry", row)  # the status, then the error column
    version = run("--version", "-v").stdout.splitlines()
    assert [line.split()[3] for line in version if line.split()[0] in ("category", "left")] == ["failed", "failed"]


def test_audit_check_reports_plugins_that_cannot_freeze_once_and_stops(run, site: Path, dists) -> None:
    dists.write_distribution(site, "foxhunt-clash", "0.3.0", {"left": ("left_plugin", SAME_SLOT),
                                                             "right": ("right_plugin", SAME_SLOT)})
    result = run("audit", "check")
    assert result.exit_code == 1
    assert result.stdout == "audit: stopped before any row was checked: fix the plugins above and run again\n"
    assert result.stderr.count("the plugins cannot be frozen") == 1
    assert "has no audit row" not in result.stderr  # no false problems from a partial component list
    assert "[left from foxhunt-clash 0.3.0] ISV slot 'shared.value' is" in result.stderr
    assert "[right from foxhunt-clash 0.3.0] ISV slot 'shared.value' is" in result.stderr


def test_console_script_shows_the_third_party_slot(tmp_path: Path, dists, thirdparty) -> None:
    site = dists.write_distribution(tmp_path / "site", "foxhunt-thirdparty", "1.2.3", thirdparty)
    executable = shutil.which("foxhunt")
    assert executable is not None, "the foxhunt console script is not installed (pip install -e .)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run(
        [executable, "layout", "show", "--json", "--set", 'plugins.only=["thirdparty"]'],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    layout = json.loads(completed.stdout)
    assert re.fullmatch(r"[0-9a-f]{16}", layout["fingerprint"])
    slots = {slot["name"]: slot for slot in layout["slots"]}
    assert {"name", "offset", "width", "owner"} <= set(slots["thirdparty.gain"])
    assert (slots["thirdparty.gain"]["owner"], slots["thirdparty.gain"]["width"]) == ("thirdparty", 3)
    assert slots["isv.fingerprint"]["offset"] + 2 == layout["size"]
    assert [s["name"] for s in layout["slots"]][-1] == "isv.fingerprint"
