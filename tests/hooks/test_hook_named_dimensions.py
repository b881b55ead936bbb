"""hooks/named_dimensions.py: no raw integer index into a buffer with a named-dimension table."""

from __future__ import annotations

import textwrap

import pytest


def raw(path: str, line: int, value: int, buffer: str, table: str, note: str = "") -> str:
    return (
        f"{path}:{line}: raw index {value} into '{buffer}' (named dimensions: {table}) "
        f"— index with the table's member name instead (invariant 5, docs/invariants.md){note}\n"
    )


@pytest.fixture
def hook(hook_modules):
    return hook_modules["named_dimensions"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()  # the repository root: the pyproject search stops here
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_raw_indices_into_default_buffers_are_rejected(hook, project, capsys):
    write(
        project / "env/step.py",
        """
        def step(portfolio, ps, actions, isv, x, i):
            cash = portfolio[:, 3]
            pos = ps[i, 2]
            direction = actions[..., 0]
            tau = isv[5]
            last = isv[-1]
            x.state[:, 1] = 0.0
            return cash, pos, direction, tau, last
        """,
    )
    assert hook.main(["env/step.py"]) == 1
    assert capsys.readouterr().out == (
        raw("env/step.py", 3, 3, "portfolio", "PS")
        + raw("env/step.py", 4, 2, "ps", "PS")
        + raw("env/step.py", 5, 0, "actions", "Branch")
        + raw("env/step.py", 6, 5, "isv", "ISV slots")
        + raw("env/step.py", 7, -1, "isv", "ISV slots")
        + raw("env/step.py", 8, 1, "state", "PS")
    )


def test_named_indices_slices_and_other_buffers_pass(hook, project, capsys):
    write(
        project / "env/ok.py",
        """
        from foxhunt.actions import Branch
        from env.tables import PS


        def step(portfolio, actions, isv, prices, state, i, slot):
            cash = portfolio[:, PS.CASH]
            head = state[:, :3]
            direction = actions[..., Branch.DIRECTION]
            tau = isv[slot]
            first_bar = prices[0]
            width = state.shape[1]
            mask = state[True]
            return cash, head, direction, tau, first_bar, width, mask, portfolio[i]
        """,
    )
    assert hook.main(["env/ok.py"]) == 0
    assert capsys.readouterr().out == ""


def test_only_the_named_last_axis_is_checked(hook, project, capsys):
    # ps[0, 2]: row 0 is an environment (no table), column 2 is a PS field by number.
    write(project / "m.py", "value = ps[0, 2]\nrow = ps[0]\n")

    assert hook.main(["m.py"]) == 1
    assert capsys.readouterr().out == raw("m.py", 1, 2, "ps", "PS")


def test_the_definition_site_may_opt_out(hook, project, capsys):
    write(
        project / "tables.py",
        """
        from foxhunt.dims import DimTable, auto


        class PS(DimTable):
            POSITION = auto()
            CASH = auto()


        assert PS.CASH == 1
        WIDTH_CHECK = lambda ps: ps[:, 1]  # dims: definition
        """,
    )
    assert hook.main(["tables.py"]) == 0
    assert capsys.readouterr().out == ""


def test_the_opt_out_is_refused_elsewhere(hook, project, capsys):
    write(project / "env.py", "cash = portfolio[:, 1]  # dims: definition\n")

    assert hook.main(["env.py"]) == 1
    note = " (`# dims: definition` is honoured only in a module that defines a DimTable)"
    assert capsys.readouterr().out == raw("env.py", 1, 1, "portfolio", "PS", note)


def test_buffers_come_from_pyproject(hook, project, capsys):
    write(
        project / "pyproject.toml",
        """
        [tool.foxhunt.named-dimensions]
        buffers = {"book" = "Level", "*_feats" = "Feature"}
        """,
    )
    write(project / "src/m.py", "a = book[:, 0]\nb = bar_feats[:, 7]\nc = portfolio[:, 3]\n")

    # The configured table replaces the defaults: portfolio is no longer a named buffer here.
    assert hook.main(["src/m.py"]) == 1
    assert capsys.readouterr().out == (
        raw("src/m.py", 1, 0, "book", "Level") + raw("src/m.py", 2, 7, "bar_feats", "Feature")
    )


def test_a_pyproject_without_the_section_gives_the_defaults(hook, project, capsys):
    write(project / "pyproject.toml", '[project]\nname = "demo"\n')
    write(project / "m.py", "a = isv[0]\n")

    assert hook.main(["m.py"]) == 1
    assert capsys.readouterr().out == raw("m.py", 1, 0, "isv", "ISV slots")


def test_a_malformed_section_is_reported(hook, project, capsys):
    write(project / "pyproject.toml", '[tool.foxhunt.named-dimensions]\nbuffers = ["isv"]\n')
    write(project / "m.py", "a = 1\n")

    assert hook.main(["m.py"]) == 1
    assert capsys.readouterr().out == (
        f"{project / 'pyproject.toml'}:1: [tool.foxhunt.named-dimensions] buffers must map buffer-name "
        'patterns to table names, e.g. buffers = {"portfolio" = "PS"}\n'
    )


def test_unparsable_files_are_reported_and_other_files_ignored(hook, project, capsys):
    write(project / "bad.py", "x = ps[\n")
    write(project / "notes.md", "ps[0]\n")

    assert hook.main(["bad.py", "notes.md"]) == 1
    assert capsys.readouterr().out.startswith("bad.py:1: cannot parse (")
