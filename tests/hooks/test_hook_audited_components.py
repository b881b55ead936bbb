"""hooks/audited_components.py: every component needs a row in docs/audits/."""

from __future__ import annotations

import textwrap

import pytest

TABLE = """\
# Components

| component | kind | plugin | status | tests |
|---|---|---|---|---|
| `c51` | loss | foxhunt_plugins.losses.c51 | wired | tests/builtin_plugins/test_c51.py |
| `tau_adapt` | kernel | foxhunt_plugins.adaptive | wired | tests/builtin_plugins/test_adaptive.py |
"""


def missing(path: str, line: int, name: str, kind: str) -> str:
    return (
        f"{path}:{line}: component '{name}' ({kind}) has no row in docs/audits/ "
        f"— add one (see docs/audits/components.md)\n"
    )


@pytest.fixture
def hook(hook_modules):
    return hook_modules["audited_components"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder with an audit table, as the working directory."""
    (tmp_path / ".git").mkdir()  # marks the repository root for the upward search
    write(tmp_path / "docs/audits/components.md", TABLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_audited_components_pass(hook, project, capsys):
    write(
        project / "foxhunt_plugins/losses/c51.py",
        """
        from foxhunt.plugin.records import Kernel, LossComponent

        def components():
            return [
                LossComponent(name="c51", budget=0.5, loss=len, description="C51"),
                Kernel(name="tau_adapt", point="step", run=len, description="tau"),
            ]
        """,
    )
    assert hook.main(["foxhunt_plugins/losses/c51.py"]) == 0
    assert capsys.readouterr().out == ""


def test_unaudited_loss_kernel_and_monitor_are_reported(hook, project, capsys):
    write(
        project / "foxhunt_plugins/mech.py",
        """
        from foxhunt.plugin import records
        from foxhunt.monitoring.monitors import AdaptiveMonitor
        from foxhunt.plugin.records import Kernel

        LOSSES = [
            records.LossComponent(
                name="iqn",
                budget=0.25, loss=len, description="IQN",
            ),
            records.LossComponent("cql", 0.25, len, "CQL"),
        ]
        KERNELS = [Kernel(name="gamma_adapt", point="step", run=len, description="gamma")]


        class DrawdownMonitor(AdaptiveMonitor):
            name = "drawdown"


        class HealthMonitor(AdaptiveMonitor):
            name: str = "health"
        """,
    )
    assert hook.main(["foxhunt_plugins/mech.py"]) == 1
    assert capsys.readouterr().out == (
        missing("foxhunt_plugins/mech.py", 8, "iqn", "loss")
        + missing("foxhunt_plugins/mech.py", 11, "cql", "loss")
        + missing("foxhunt_plugins/mech.py", 13, "gamma_adapt", "kernel")
        + missing("foxhunt_plugins/mech.py", 17, "drawdown", "monitor")
        + missing("foxhunt_plugins/mech.py", 21, "health", "monitor")
    )


def test_an_unaudited_gradient_combiner_is_reported(hook, project, capsys):
    write(
        project / "foxhunt_plugins/combiners/mean.py",
        """
        import foxhunt

        COMBINERS = [foxhunt.GradientCombiner(name="mean", combine=len, description="the mean")]
        """,
    )
    assert hook.main(["foxhunt_plugins/combiners/mean.py"]) == 1
    assert capsys.readouterr().out == missing("foxhunt_plugins/combiners/mean.py", 4, "mean", "combiner")


def test_an_unaudited_encoder_is_reported(hook, project, capsys):
    write(
        project / "foxhunt_plugins/encoders/mean.py",
        """
        import foxhunt

        ENCODERS = [foxhunt.Encoder(name="window_mean", window=4, build=len, description="the mean")]
        """,
    )
    assert hook.main(["foxhunt_plugins/encoders/mean.py"]) == 1
    assert capsys.readouterr().out == missing("foxhunt_plugins/encoders/mean.py", 4, "window_mean", "encoder")


def test_a_renamed_component_needs_its_new_row(hook, project, capsys):
    write(project / "foxhunt_plugins/c51.py", 'LossComponent(name="c51_v2", budget=1.0, loss=len, description="x")\n')

    assert hook.main(["foxhunt_plugins/c51.py"]) == 1
    assert capsys.readouterr().out == missing("foxhunt_plugins/c51.py", 1, "c51_v2", "loss")


def test_names_that_are_not_literals_and_unrelated_classes_are_left_to_the_runtime_check(hook, project, capsys):
    write(
        project / "foxhunt_plugins/dynamic.py",
        """
        NAME = "dyn"
        LossComponent(name=NAME, budget=1.0, loss=len, description="x")


        class Helper:
            name = "not_a_monitor"


        class Derived(DrawdownMonitor):
            name = "indirect"
        """,
    )
    assert hook.main(["foxhunt_plugins/dynamic.py"]) == 0
    assert capsys.readouterr().out == ""


def test_plugin_entry_points_need_rows(hook, project, capsys):
    write(
        project / "pyproject.toml",
        """
        [project]
        name = "demo"

        [project.entry-points."foxhunt.plugins"]
        c51 = "foxhunt_plugins.losses.c51"
        "tau" = "foxhunt_plugins.adaptive.tau"

        [tool.other]
        x = 1
        """,
    )
    assert hook.main(["pyproject.toml"]) == 1
    assert capsys.readouterr().out == missing("pyproject.toml", 7, "tau", "plugin")


def test_an_unparsable_file_is_reported_not_skipped(hook, project, capsys):
    write(project / "foxhunt_plugins/bad.py", "def f(:\n")
    write(project / "pyproject.toml", "[project\n")

    assert hook.main(["foxhunt_plugins/bad.py", "pyproject.toml"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "foxhunt_plugins/bad.py:1: cannot parse (invalid syntax), so its components cannot be checked"
    assert out[1].startswith("pyproject.toml:1: cannot parse (")
    assert out[1].endswith("), so its plugin entry points cannot be checked")


def test_test_files_are_skipped(hook, project, capsys):
    fake = 'LossComponent(name="fake_for_test", budget=1.0, loss=len, description="x")\n'
    write(project / "tests/builtin_plugins/helpers.py", fake)
    write(project / "foxhunt_plugins/test_fake.py", fake)
    write(project / "conftest.py", fake)

    assert hook.main(["tests/builtin_plugins/helpers.py", "foxhunt_plugins/test_fake.py", "conftest.py"]) == 0
    assert capsys.readouterr().out == ""


def test_an_example_plugin_may_keep_its_own_audit_table(hook, project, capsys):
    example = project / "examples/huber"
    write(example / "docs/audits/components.md", "| `huber` | loss | huber_loss | wired | tests/test_huber.py |\n")
    write(example / "huber_loss/plugin.py", 'LossComponent(name="huber", budget=0.2, loss=len, description="x")\n')
    write(example / "huber_loss/other.py", 'LossComponent(name="c51", budget=0.2, loss=len, description="x")\n')

    # Its own table and the repository's both count.
    assert hook.main(["examples/huber/huber_loss/plugin.py", "examples/huber/huber_loss/other.py"]) == 0
    assert capsys.readouterr().out == ""


def test_removing_a_row_rechecks_every_tracked_file(hook, repo, monkeypatch, capsys):
    repo.write("docs/audits/components.md", TABLE)
    repo.write("foxhunt_plugins/c51.py", 'LossComponent(name="c51", budget=1.0, loss=len, description="x")\n')
    repo.write("README.md", "demo\n")
    repo.commit_all()
    monkeypatch.chdir(repo.root)
    assert hook.main(["docs/audits/components.md"]) == 0

    repo.write("docs/audits/components.md", TABLE.replace("`c51`", "`c52`"))

    assert hook.main(["docs/audits/components.md"]) == 1
    assert capsys.readouterr().out == missing("foxhunt_plugins/c51.py", 1, "c51", "loss")


def test_other_files_are_ignored(hook, project, capsys):
    write(project / "README.md", 'LossComponent(name="nope")\n')

    assert hook.main(["README.md", "missing.py"]) == 0
    assert capsys.readouterr().out == ""
