"""docs/adaptive.md's slot and signal tables, generated from foxhunt.contract and the built-in plugins' reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from foxhunt.cli.audit_commands import audit_group
from foxhunt.tooling.contract_docs import (adaptive_doc_path, builtin_components, render_tables, replace_tables,
                                           stale_tables)

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_adaptive_doc_tables_match_the_contract() -> None:
    text = (ROOT / "docs" / "adaptive.md").read_text(encoding="utf-8")
    assert stale_tables(text, render_tables(builtin_components())) == [], "run `foxhunt audit contract --write`"


def test_a_stale_table_is_found_and_the_command_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "adaptive.md").read_text(encoding="utf-8")
    tables = render_tables(builtin_components())
    edited = text.replace("| `tau.value` | [1] | tau |", "| `tau.value` | [2] | tau |")
    assert stale_tables(edited, tables) == ["slots"]
    assert replace_tables(edited, tables) == text
    doc = tmp_path / "adaptive.md"
    doc.write_text(edited, encoding="utf-8")
    monkeypatch.setattr("foxhunt.cli.audit_commands.adaptive_doc_path", lambda: doc)
    result = CliRunner().invoke(audit_group, ["contract", "--check"])
    assert result.exit_code == 1
    assert "the slots table(s) are stale" in result.output
    assert CliRunner().invoke(audit_group, ["contract", "--write"]).exit_code == 0
    assert doc.read_text(encoding="utf-8") == text


def test_a_document_without_the_markers_is_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="no <!-- contract:slots:start"):
        replace_tables("no tables here", {"slots": "| x |"})


def test_the_document_is_the_checkouts_from_any_working_directory(tmp_path: Path) -> None:
    # the checkout is found from the module's own place in the tree, not from where the command runs
    code = "from foxhunt.tooling.contract_docs import adaptive_doc_path; print(adaptive_doc_path())"
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": python_path})
    assert Path(done.stdout.strip()) == ROOT / "docs" / "adaptive.md"
    assert adaptive_doc_path() == ROOT / "docs" / "adaptive.md"
