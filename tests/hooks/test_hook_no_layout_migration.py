"""hooks/no_layout_migration.py: no function or class named like a layout migration."""

from __future__ import annotations

import textwrap

import pytest

MESSAGE = (
    "looks like a layout migration — the ISV layout fingerprint is fail-fast by design "
    "(invariant 4, docs/invariants.md) and there is no migration path: retrain with the new layout instead"
)


@pytest.fixture
def hook(hook_modules):
    return hook_modules["no_layout_migration"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.mark.parametrize(
    "name",
    [
        "migrate_isv_layout",
        "migrate_checkpoint",
        "upgrade_checkpoint_layout",
        "_migrate_fingerprint",
        "upgrade_schema",
        "isv_migration",
        "MIGRATE_ISV",
        "convert_checkpoint",
        "convert_old_checkpoint",
        "convert_legacy_layout",
        "remap_slots",
        "remap_isv_slots",
        "migrateIsvLayout",
    ],
)
def test_migration_names_are_rejected(hook, in_tmp, capsys, name):
    write(in_tmp / "ckpt.py", f"import torch\n\n\ndef {name}(state):\n    return state\n")

    assert hook.main(["ckpt.py"]) == 1
    assert capsys.readouterr().out == f"ckpt.py:4: function '{name}' {MESSAGE}\n"


def test_methods_async_functions_and_classes_are_checked(hook, in_tmp, capsys):
    write(
        in_tmp / "io.py",
        """
        class Loader:
            def load(self, path):
                return path

            async def upgrade_checkpoint(self, blob):
                return blob


        class CheckpointMigrator:
            def run(self):
                return 0
        """,
    )
    assert hook.main(["io.py"]) == 1
    assert capsys.readouterr().out == (
        f"io.py:6: function 'upgrade_checkpoint' {MESSAGE}\n" + f"io.py:10: class 'CheckpointMigrator' {MESSAGE}\n"
    )


@pytest.mark.parametrize(
    "name",
    ["load_checkpoint", "fingerprint_layout", "layout_diff", "migrate_database_rows", "upgrade_pip", "convert_prices"],
)
def test_ordinary_names_pass(hook, in_tmp, capsys, name):
    write(in_tmp / "ok.py", f"def {name}():\n    return 1\n")

    assert hook.main(["ok.py"]) == 0
    assert capsys.readouterr().out == ""


def test_tests_may_name_the_refusal(hook, in_tmp, capsys):
    # A test that shows a mismatched layout fails fast is not a migration path...
    write(in_tmp / "tests/test_ckpt.py", "def test_old_checkpoint_layout_has_no_migration():\n    assert True\n")
    # ...but a helper in a test module, or a test_ function outside one, is still checked.
    write(in_tmp / "tests/test_helpers.py", "def migrate_layout(x):\n    return x\n")
    write(in_tmp / "pkg/ckpt.py", "def test_migrate_layout():\n    return 1\n")

    assert hook.main(["tests/test_ckpt.py", "tests/test_helpers.py", "pkg/ckpt.py"]) == 1
    assert capsys.readouterr().out == (
        f"tests/test_helpers.py:1: function 'migrate_layout' {MESSAGE}\n"
        f"pkg/ckpt.py:1: function 'test_migrate_layout' {MESSAGE}\n"
    )


def test_unparsable_files_are_reported_and_other_files_ignored(hook, in_tmp, capsys):
    write(in_tmp / "bad.py", "def (:\n")
    write(in_tmp / "notes.md", "def migrate_isv_layout():\n")

    assert hook.main(["bad.py", "notes.md"]) == 1
    assert capsys.readouterr().out == (
        "bad.py:1: cannot parse (invalid syntax), so its function names cannot be checked\n"
    )
