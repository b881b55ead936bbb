"""The runtime audit check (`foxhunt audit check` / `missing` / `dims`) over every installed plugin."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import attrs
from click.testing import CliRunner

from foxhunt import LossComponent, hookimpl
from foxhunt.cli.audit_commands import audit_group
from foxhunt.tooling.audit import AUDIT_ATTRIBUTE, check, default_audit_dirs, missing, parse_rows
from foxhunt.testing import make_host

ROOT = Path(__file__).resolve().parents[2]
HEADER = "| component | kind | plugin | status | tests |\n|---|---|---|---|---|\n"
ROW = HEADER + "| `toy.loss` | loss | toy (toy_plugin) | wired | tests/test_audit.py |\n"


@attrs.frozen
class OptIn:
    enabled: bool = False


def toy_plugin(name: str = "toy.loss", *, audit: str | None = None, opt_in: bool = False) -> types.ModuleType:
    @hookimpl
    def foxhunt_declare(registrar):
        if opt_in:
            registrar.settings(OptIn)

    @hookimpl
    def foxhunt_loss_components(config, settings):
        if opt_in and not settings.enabled:
            return []
        return [LossComponent(name, 1.0, lambda inputs: inputs, "a toy loss")]

    module = types.ModuleType("toy_plugin")
    module.foxhunt_declare = foxhunt_declare
    module.foxhunt_loss_components = foxhunt_loss_components
    if audit is not None:
        setattr(module, AUDIT_ATTRIBUTE, audit)
    return module


def audits(tmp_path: Path, text: str) -> Path:
    directory = tmp_path / "docs" / "audits"
    directory.mkdir(parents=True)
    (directory / "components.md").write_text(text, encoding="utf-8")
    return directory


def test_parse_rows_reads_table_rows_and_skips_header_and_separator():
    other_table = "| where | operation | class |\n|---|---|---|\n| `learner.py` | `.item()` | none |\n"
    text = "intro\n" + ROW + "\n" + other_table
    [row] = parse_rows(text, "t.md")  # the other table's backticked first cell is not a component row
    assert (row.name, row.kind, row.plugin, row.status, row.tests, row.source) == (
        "toy.loss", "loss", "toy (toy_plugin)", "wired", "tests/test_audit.py", "t.md:4")
    assert parse_rows("| `toy.loss` | loss | toy | wired | t |\n", "t.md") == []  # a row needs its table header


def test_every_installed_component_has_an_audit_row():
    report = check()
    assert report.problems == []
    kinds = {c.kind for c in report.components}
    assert {"plugin", "loss", "kernel", "monitor"} <= kinds  # the built-in set has all four


def test_a_feature_plugins_families_are_components_with_rows():
    from foxhunt_plugins import book_features

    report = check(host=make_host((book_features, "book_features")))
    assert report.problems == []
    assert {c.name for c in report.components if c.kind == "feature"} == {f.base for f in book_features.FAMILIES}


def test_a_component_without_a_row_is_reported_and_missing_prints_its_row(tmp_path):
    directory = audits(tmp_path, "")
    report = check([directory], host=make_host((toy_plugin(), "toy")))
    assert [c.name for c in report.missing] == ["toy.loss"]
    assert "loss `toy.loss` of plugin 'toy' ((in-process)) has no audit row" in report.problems[0]
    printed = missing([directory], host=make_host((toy_plugin(), "toy")))
    assert printed.splitlines() == [
        "| component | kind | plugin | status | tests |",
        "|---|---|---|---|---|",
        "| `toy.loss` | loss | toy (toy_plugin) | (status) | (tests) |",
    ]


def test_pasted_rows_must_be_filled_in(tmp_path):
    directory = audits(tmp_path, HEADER + "| `toy.loss` | loss | toy (toy_plugin) | (status) | (tests) |\n")
    problems = check([directory], host=make_host((toy_plugin(), "toy"))).problems
    assert any("status '(status)' is not one of wired, partial, orphan, out of scope" in p for p in problems)
    assert any("replace (tests) with the tests that cover it" in p for p in problems)


def test_a_filled_in_row_passes_and_its_test_paths_must_exist(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_audit.py").write_text("", encoding="utf-8")
    assert check([audits(tmp_path, ROW)], host=make_host((toy_plugin(), "toy"))).ok
    other = tmp_path / "elsewhere"
    report = check([audits(other, ROW)], host=make_host((toy_plugin(), "toy")))
    assert any("names tests/test_audit.py, which does not exist" in p for p in report.problems)


def test_row_with_the_wrong_kind_is_reported(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_audit.py").write_text("", encoding="utf-8")
    directory = audits(tmp_path, ROW.replace("| loss |", "| kernel |"))
    problems = check([directory], host=make_host((toy_plugin(), "toy"))).problems
    assert any("says kind 'kernel', but it is a loss" in p for p in problems)


def test_a_plugin_ships_its_own_rows_but_cannot_audit_another_plugin(tmp_path):
    directory = audits(tmp_path, "")
    assert check([directory], host=make_host((toy_plugin(audit=ROW), "toy"))).ok
    host = make_host((toy_plugin(), "toy"), (toy_plugin("other.loss", audit=ROW), "other"))
    report = check([directory], host=host)
    assert sorted(c.name for c in report.missing) == ["other.loss", "toy.loss"]


def test_opt_in_components_are_found_with_their_enabled_setting_on(tmp_path):
    report = check([audits(tmp_path, "")], host=make_host((toy_plugin(opt_in=True), "toy")))
    assert [c.name for c in report.missing] == ["toy.loss"]


def clashing_plugin() -> types.ModuleType:
    @hookimpl
    def foxhunt_declare(registrar):
        registrar.slot("shared.value")
        registrar.state("shared.value", "fold-reset")

    module = types.ModuleType("clashing_plugin")
    module.foxhunt_declare = foxhunt_declare
    module.__version__ = "2.0"
    return module


def test_plugins_that_cannot_freeze_are_the_whole_report(tmp_path):
    # Nothing else can be judged without the components: no missing rows, no row checks, one problem.
    directory = audits(tmp_path, HEADER + "| `toy.loss` | loss | toy (toy_plugin) | (status) | (tests) |\n")
    report = check([directory], host=make_host((clashing_plugin(), "left"), (clashing_plugin(), "right")))
    (problem,) = report.problems
    assert not report.ok and not report.frozen and report.missing == [] and report.components == []
    assert problem.startswith("the plugins cannot be frozen, so their components cannot be listed and no audit row "
                              "was checked; 4 plugin problem(s) stop this run:")
    assert "  - [right from (in-process) 0] ISV slot 'shared.value' is already declared by plugin 'left'" in problem


def test_cli_check_exits_0_on_this_repository_and_1_when_rows_are_missing(tmp_path):
    runner = CliRunner()
    result = runner.invoke(audit_group, ["check"])
    assert result.exit_code == 0, result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(audit_group, ["check", "--audits", str(empty), "--plugin", "mse"])
    assert result.exit_code == 1
    assert "loss `mse` of plugin 'mse' (foxhunt) has no audit row" in result.output
    result = runner.invoke(audit_group, ["missing", "--audits", str(empty), "--plugin", "mse"])
    assert result.exit_code == 0
    assert "| `mse` | loss | mse (foxhunt_plugins.losses.mse) | (status) | (tests) |" in result.output


def test_named_dimensions_reference_is_up_to_date():
    result = CliRunner().invoke(audit_group, ["dims", "--check"])
    assert result.exit_code == 0, result.output + " (regenerate: foxhunt audit dims --write)"


def writer_plugin(*, read: bool) -> types.ModuleType:
    """A plugin whose kernel writes its slot ``writer.value``; with ``read``, its monitor reads it."""
    from foxhunt import AdaptiveMonitor, Kernel, KernelPoint, MONITOR_STATE_PREFIX, reset_monitor

    @hookimpl
    def foxhunt_declare(registrar):
        registrar.slot("writer.value")
        registrar.state("writer.value", "fold-reset")
        registrar.state(MONITOR_STATE_PREFIX + "writer", "fold-reset", reset=reset_monitor)

    @hookimpl
    def foxhunt_kernels():
        return [Kernel("writer.update", KernelPoint.STEP, lambda context: None, "writes writer.value",
                       writes=["writer.value"])]

    @hookimpl
    def foxhunt_monitors():
        return [AdaptiveMonitor("writer", ["writer.value"])] if read else []

    module = types.ModuleType("writer_plugin")
    module.foxhunt_declare = foxhunt_declare
    module.foxhunt_kernels = foxhunt_kernels
    module.foxhunt_monitors = foxhunt_monitors
    rows = ["| `writer` | plugin | writer | wired | tests/test_audit.py |",
            "| `writer.update` | kernel | writer | wired | tests/test_audit.py |"]
    if read:
        rows[0] = "| `writer` | monitor | writer | wired | tests/test_audit.py |"
    setattr(module, AUDIT_ATTRIBUTE, HEADER + "\n".join(rows) + "\n")
    return module


def test_a_slot_written_and_never_read_fails_the_check_naming_it(tmp_path, monkeypatch):
    from foxhunt.plugin.host import PluginHost

    discover = PluginHost.discover

    def discover_with_writer(self):
        discover(self)
        self.add_plugin(writer_plugin(read=False), "writer", distribution="foxhunt-writer", version="2.0")
        return self

    monkeypatch.setattr(PluginHost, "discover", discover_with_writer)
    result = CliRunner().invoke(audit_group, ["check"])
    assert result.exit_code == 1
    assert ("ISV slot 'writer.value' of plugin 'writer' (foxhunt-writer 2.0) is written by kernel writer.update "
            "but read by nothing") in result.output
    assert result.output.count("read by nothing") == 1  # every built-in slot has a reader


def test_a_monitor_reading_the_slot_is_its_reader():
    report = check([ROOT / "docs" / "audits"], host=make_host((writer_plugin(read=True), "writer")))
    assert [p for p in report.problems if "writer.value" in p] == []
    unread = check([ROOT / "docs" / "audits"], host=make_host((writer_plugin(read=False), "writer")))
    assert any("'writer.value'" in p and "read by nothing" in p for p in unread.problems)


def test_an_encoders_own_monitor_is_found_with_that_encoder_selected(tmp_path):
    """The vsn plugin returns its monitor only in runs that select vsn: the audit asks with each encoder selected,
    so the monitor needs its row and counts as the reader of the slot the encoder writes."""
    from foxhunt_plugins.encoders import vsn

    report = check([audits(tmp_path, "")], host=make_host((vsn, vsn.NAME)))
    assert {c.name for c in report.missing} >= {"vsn", "vsn.selection"}
    assert [p for p in report.problems if "read by nothing" in p] == []


def test_the_checkouts_tables_are_found_from_any_working_directory(tmp_path):
    # the checkout's docs/audits is found from the module's own place in the tree, not from where the command runs
    code = "from foxhunt.tooling.audit import default_audit_dirs; print(*default_audit_dirs(), sep=chr(10))"
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": python_path})
    assert [Path(line) for line in done.stdout.splitlines()] == [ROOT / "docs" / "audits"]
    assert default_audit_dirs()[0] == ROOT / "docs" / "audits"
