"""hooks/registry_snapshot.py: runs `foxhunt registry check` and passes its result through."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture
def hook(hook_modules):
    return hook_modules["registry_snapshot"]


def fake_foxhunt(folder, output: str, status: int) -> None:
    """A `foxhunt` command that records its arguments and answers like the real check."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "foxhunt"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"print({output!r} + ' ' + ' '.join(sys.argv[1:]))\n"
        f"sys.exit({status})\n"
    )
    script.chmod(0o755)


@pytest.mark.parametrize(("output", "status"), [("registry/ is up to date:", 0), ("registry/isv.toml differs:", 3)])
def test_output_and_status_are_passed_through(hook, tmp_path, monkeypatch, capfd, output, status):
    fake_foxhunt(tmp_path / "bin", output, status)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))

    assert hook.main(["foxhunt/env.py", "registry/isv.toml"]) == status
    assert capfd.readouterr().out == f"{output} registry check\n"


def test_without_foxhunt_it_says_how_to_install_and_fails(hook, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    assert hook.main([]) == 1
    assert capfd.readouterr().out == (
        "registry_snapshot: the `foxhunt` command is not on PATH, so the registry/ snapshots cannot be checked. "
        "Install the project into the environment that runs the hooks: pip install -e . "
        "(from the repository root), then commit again.\n"
    )
    assert not os.path.exists(tmp_path / "empty")
