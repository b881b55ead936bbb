"""hooks/no_deferred_work.py: marker words on added lines, placeholder bodies."""

from __future__ import annotations

import textwrap

import pytest

# The marker words, built from pieces so that this file passes the hook it tests.
TODO_WORD, FIXME_WORD, XXX_WORD, HACK_WORD, TBD_WORD = "TO" + "DO", "FIX" + "ME", "X" * 3, "HA" + "CK", "T" + "BD"
INTERFACES = "@abstractmethod, a typing.Protocol, a pluggy @hookspec"


def marker(path: str, line: int, word: str) -> str:
    return f"{path}:{line}: deferred-work marker '{word}' — finish the work or file an issue (invariant 7, docs/invariants.md)\n"


def placeholder(path: str, line: int, name: str, kind: str) -> str:
    return (
        f"{path}:{line}: placeholder function '{name}' ({kind}) — implement it, or make it an abstract "
        f"interface ({INTERFACES}) (invariant 7, docs/invariants.md)\n"
    )


@pytest.fixture
def hook(hook_modules):
    return hook_modules["no_deferred_work"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path.name


# -- whole files ----------------------------------------------------------


@pytest.mark.parametrize("word", [TODO_WORD, FIXME_WORD, XXX_WORD, HACK_WORD, TBD_WORD])
def test_each_marker_is_found_in_code_comments_and_docs(hook, in_tmp, capsys, word):
    write(in_tmp / "mod.py", f'x = 1  # {word}: tidy\nlabel = "{word}"\n')
    write(in_tmp / "notes.md", f"# Notes\n\nThe fee model is {word}.\n")

    assert hook.main(["--whole-file", "mod.py", "notes.md"]) == 1

    assert capsys.readouterr().out == (
        marker("mod.py", 1, word) + marker("mod.py", 2, word) + marker("notes.md", 3, word)
    )


def test_markers_count_only_as_whole_capitalised_words(hook, in_tmp, capsys):
    words = [
        f"{TODO_WORD}LIST",
        TODO_WORD.lower(),
        f"{XXX_WORD.lower()}_count",
        f"{HACK_WORD.title()}athon",
        f"{TBD_WORD}X",
        f"prefix_{FIXME_WORD}",
    ]
    write(in_tmp / "ok.md", " ".join(words) + "\n")

    assert hook.main(["--whole-file", "ok.md"]) == 0
    assert capsys.readouterr().out == ""


def test_a_plural_marker_still_counts(hook, in_tmp, capsys):
    write(in_tmp / "mod.py", f"# {TODO_WORD}s: two of them\n")

    assert hook.main(["--whole-file", "mod.py"]) == 1
    assert capsys.readouterr().out == marker("mod.py", 1, TODO_WORD + "s")


def test_a_clean_file_passes(hook, in_tmp, capsys):
    write(
        in_tmp / "clean.py",
        '''
        def kelly_cap(wins: int, losses: int) -> float:
            """Bayesian Kelly fraction."""
            return (wins + 1) / (wins + losses + 2)
        ''',
    )
    assert hook.main(["--whole-file", "clean.py"]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("pass", "its body is only `pass`"),
        ("...", "its body is only `...`"),
        ("raise NotImplementedError", "its body only raises NotImplementedError"),
        ('raise NotImplementedError("later")', "its body only raises NotImplementedError"),
        ('"""Compute the cap."""\n    pass', "its body is only `pass`"),
        ('"""Compute the cap."""\n    raise NotImplementedError()', "its body only raises NotImplementedError"),
    ],
)
def test_placeholder_bodies_are_rejected(hook, in_tmp, capsys, body, kind):
    write(in_tmp / "stub.py", f"import os\n\n\ndef kelly_cap(x):\n    {body}\n")

    assert hook.main(["--whole-file", "stub.py"]) == 1
    assert capsys.readouterr().out == placeholder("stub.py", 4, "kelly_cap", kind)


def test_methods_and_nested_and_async_placeholders_are_rejected(hook, in_tmp, capsys):
    write(
        in_tmp / "stubs.py",
        """
        class Fill:
            def price(self):
                raise NotImplementedError


        def outer():
            def inner():
                ...
            return inner


        async def fetch():
            pass
        """,
    )
    assert hook.main(["--whole-file", "stubs.py"]) == 1
    assert capsys.readouterr().out == (
        placeholder("stubs.py", 3, "price", "its body only raises NotImplementedError")
        + placeholder("stubs.py", 8, "inner", "its body is only `...`")
        + placeholder("stubs.py", 13, "fetch", "its body is only `pass`")
    )


def test_abstract_interfaces_may_have_empty_bodies(hook, in_tmp, capsys):
    write(
        in_tmp / "interfaces.py",
        '''
        import abc
        import typing
        from abc import ABC, abstractmethod
        from typing import Protocol, overload

        import pluggy

        hookspec = pluggy.HookspecMarker("foxhunt")


        class Monitor(ABC):
            @abstractmethod
            def observe(self, isv):
                """Read the ISV."""

            @property
            @abc.abstractmethod
            def name(self):
                raise NotImplementedError


        class Reader(Protocol):
            def read(self) -> bytes: ...


        class Writer(typing.Protocol[typing.AnyStr]):
            def write(self, data):
                pass


        @hookspec
        def foxhunt_declare(registrar):
            """Claim slots."""


        @hookspec(firstresult=True)
        def foxhunt_pick(config):
            ...


        @overload
        def scale(x: int) -> int: ...
        @overload
        def scale(x: float) -> float: ...
        def scale(x):
            return 2 * x


        def close():
            """Nothing to release: the monitor holds no resources."""
        ''',
    )
    assert hook.main(["--whole-file", "interfaces.py"]) == 0
    assert capsys.readouterr().out == ""


def test_a_concrete_method_of_an_abc_is_not_exempt(hook, in_tmp, capsys):
    write(
        in_tmp / "base.py",
        """
        from abc import ABC


        class Loss(ABC):
            def value(self):
                raise NotImplementedError
        """,
    )
    assert hook.main(["--whole-file", "base.py"]) == 1
    assert capsys.readouterr().out == placeholder("base.py", 6, "value", "its body only raises NotImplementedError")


def test_an_unparsable_python_file_is_still_checked_for_markers(hook, in_tmp, capsys):
    write(in_tmp / "broken.py", f"def f(:\n    # {FIXME_WORD}\n")

    assert hook.main(["--whole-file", "broken.py"]) == 1
    assert capsys.readouterr().out == marker("broken.py", 2, FIXME_WORD)


def test_binary_and_missing_files_are_skipped(hook, in_tmp, capsys):
    (in_tmp / "blob.bin").write_bytes(b"\0\1" + TODO_WORD.encode())

    assert hook.main(["--whole-file", "blob.bin", "gone.py"]) == 0
    assert capsys.readouterr().out == ""


def test_no_files_is_a_pass(hook, capsys):
    assert hook.main([]) == 0
    assert capsys.readouterr().out == ""


# -- the staged diff (the default) ----------------------------------------


@pytest.fixture
def staged_repo(repo, monkeypatch):
    """A repository whose committed history already holds a marker and a stub, as inherited code might."""
    repo.write(
        "src/fees.py",
        f"# {HACK_WORD}: inherited\n"
        "\n"
        "\n"
        "def commission(contracts):\n"
        "    pass\n"
        "\n"
        "\n"
        "def spread(price):\n"
        "    return price * 1e-4\n",
    )
    repo.commit_all()
    monkeypatch.chdir(repo.root)
    return repo


def test_only_added_lines_are_checked_by_default(hook, staged_repo, capsys):
    text = (staged_repo.root / "src/fees.py").read_text()
    staged_repo.write("src/fees.py", text + f"\n\nSLIPPAGE = 0.5  # {TBD_WORD}\n")
    staged_repo.git("add", "src/fees.py")

    assert hook.main(["src/fees.py"]) == 1
    # The inherited marker (line 1) and the untouched stub (line 4) are not this change's doing.
    assert capsys.readouterr().out == marker("src/fees.py", 12, TBD_WORD)


def test_a_touched_placeholder_is_rejected_and_an_untouched_one_is_not(hook, staged_repo, capsys):
    text = (staged_repo.root / "src/fees.py").read_text()
    staged_repo.write("src/fees.py", text.replace("def commission(contracts):", "def commission(contracts, venue):"))
    staged_repo.write("src/slip.py", "def slip(order):\n    ...\n")
    staged_repo.git("add", "src/fees.py", "src/slip.py")

    assert hook.main(["src/fees.py", "src/slip.py"]) == 1
    assert capsys.readouterr().out == (
        placeholder("src/fees.py", 4, "commission", "its body is only `pass`")
        + placeholder("src/slip.py", 1, "slip", "its body is only `...`")
    )


def test_unstaged_lines_are_not_part_of_the_commit(hook, staged_repo, capsys):
    text = (staged_repo.root / "src/fees.py").read_text()
    staged_repo.write("src/fees.py", text + f"# {XXX_WORD}\n")

    assert hook.main(["src/fees.py"]) == 0
    assert capsys.readouterr().out == ""


def test_a_clean_staged_change_passes(hook, staged_repo, capsys):
    text = (staged_repo.root / "src/fees.py").read_text()
    staged_repo.write("src/fees.py", text.replace("1e-4", "2e-4"))
    staged_repo.git("add", "src/fees.py")

    assert hook.main(["src/fees.py"]) == 0
    assert capsys.readouterr().out == ""


def test_added_lines_that_look_like_diff_headers_are_content(hook, staged_repo, capsys):
    # A markdown list item "++ x" becomes the diff line "+++ x": it must not be read as a file header.
    staged_repo.write("notes.md", f"first\n++ {FIXME_WORD} here\n--- rule\n")
    staged_repo.git("add", "notes.md")

    assert hook.main(["notes.md"]) == 1
    assert capsys.readouterr().out == marker("notes.md", 2, FIXME_WORD)


@pytest.mark.parametrize("name", ["with space.md", 'with"quote.md', "accentué.md"])
def test_unusual_file_names_are_mapped_back_to_the_path_given(hook, staged_repo, capsys, name):
    staged_repo.write(f"docs/{name}", f"ok\n{TODO_WORD}\n")
    staged_repo.git("add", "-A")

    assert hook.main([f"docs/{name}"]) == 1
    assert capsys.readouterr().out == marker(f"docs/{name}", 2, TODO_WORD)


def test_paths_are_reported_as_given_from_a_subdirectory(hook, staged_repo, monkeypatch, capsys):
    staged_repo.write("src/new.py", f"VALUE = 1  # {TODO_WORD}\n")
    staged_repo.git("add", "src/new.py")
    monkeypatch.chdir(staged_repo.root / "src")

    assert hook.main(["new.py"]) == 1
    assert capsys.readouterr().out == marker("new.py", 1, TODO_WORD)


def test_outside_a_git_repository_the_default_mode_fails_and_says_why(hook, in_tmp, git_env, monkeypatch, capsys):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(in_tmp.parent))  # whatever encloses the temporary folder
    write(in_tmp / "mod.py", "x = 1\n")

    assert hook.main(["mod.py"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("no_deferred_work: cannot read the staged diff (")
    assert out.endswith("run it inside a git repository, or pass --whole-file\n")
