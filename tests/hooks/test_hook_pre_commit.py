"""The hooks under pre-commit itself, in real git repositories in temporary folders.

Everything here runs offline: `repo: local` hooks with `language: system`, and
the published manifest (`language: script`) cloned from a local repository.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml  # a dependency of pre-commit

REPO_ROOT = Path(__file__).resolve().parents[2]
HOOKS_DIR = REPO_ROOT / "hooks"

TODO_WORD = "TO" + "DO"
MANIFEST = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())

CLEAN_PY = 'def spread(price: float) -> float:\n    """Half the quoted spread."""\n    return price * 1e-4\n'
AUDIT_TABLE = "| component | kind |\n|---|---|\n| `huber` | loss |\n"

# One offending change per hook: the files to stage, and a line the hook must print.
OFFENDING = {
    "no-deferred-work": (
        {"fees.py": f"COMMISSION = 2.5  # {TODO_WORD} per venue\n"},
        "fees.py:1: deferred-work marker '" + TODO_WORD + "' — finish the work or file an issue (invariant 7, docs/invariants.md)",
    ),
    "audited-components": (
        {"huber.py": 'LOSS = LossComponent(name="pseudo_huber", budget=1.0, loss=abs, description="x")\n'},
        "huber.py:1: component 'pseudo_huber' (loss) has no row in docs/audits/ "
        "— add one (see docs/audits/components.md)",
    ),
    "no-layout-migration": (
        {"ckpt.py": "def migrate_isv_layout(blob):\n    return blob\n"},
        "ckpt.py:1: function 'migrate_isv_layout' looks like a layout migration — the ISV layout fingerprint "
        "is fail-fast by design (invariant 4, docs/invariants.md) and there is no migration path: retrain with the new "
        "layout instead",
    ),
    "named-dimensions": (
        {"env.py": "def cash(portfolio):\n    return portfolio[:, 3]\n"},
        "env.py:2: raw index 3 into 'portfolio' (named dimensions: PS) — index with the table's member name "
        "instead (invariant 5, docs/invariants.md)",
    ),
    "registry-snapshot": (
        {"plugin.py": CLEAN_PY},
        "registry/isv.toml: slot 'tau' moved from 3 to 4",
    ),
}


def local_config(stage_manual: bool = False) -> str:
    """The published hooks as `repo: local` entries that run this checkout's programs with this Python."""
    hooks = []
    for hook in MANIFEST:
        script, *args = shlex.split(hook["entry"])
        entry = shlex.join([sys.executable, str(REPO_ROOT / script), *args])
        local = {**hook, "entry": entry, "language": "system"}
        if stage_manual:
            local.pop("stages", None)
        hooks.append(local)
    # JSON is YAML, and it quotes every path and pattern correctly.
    return json.dumps({"repos": [{"repo": "local", "hooks": hooks}]}, indent=2)


@pytest.fixture
def fake_foxhunt(repo, tmp_path):
    """Put a `foxhunt` first on the repository's PATH that reports what `registry check` says."""

    def install(output: str, status: int) -> None:
        folder = tmp_path / "fake-bin"
        folder.mkdir(exist_ok=True)
        script = folder / "foxhunt"
        script.write_text(f"#!{sys.executable}\nimport sys\nprint({output!r})\nsys.exit({status})\n")
        script.chmod(0o755)
        repo.env["PATH"] = f"{folder}:{repo.env['PATH']}"

    return install


@pytest.fixture
def plugin_repo(repo, fake_foxhunt):
    """A plugin author's repository: an audit table, one committed module, the hooks configured locally."""
    repo.write(".pre-commit-config.yaml", local_config())
    repo.write("docs/audits/components.md", AUDIT_TABLE)
    repo.write("spread.py", CLEAN_PY)
    assert repo.commit_all().returncode == 0
    fake_foxhunt("registry/ is up to date", 0)
    return repo


def test_the_manifest_publishes_every_hook():
    ids = {hook["id"] for hook in MANIFEST}
    assert ids == {*OFFENDING, "no-deferred-work-whole-file"}
    for hook in MANIFEST:
        script = REPO_ROOT / shlex.split(hook["entry"])[0]
        # language: script executes the file itself.
        assert script.is_file() and script.stat().st_mode & 0o111, script
        assert script.read_text().startswith("#!/usr/bin/env python3\n")


@pytest.mark.parametrize("hook_id", sorted(OFFENDING))
def test_each_hook_blocks_its_offending_change(plugin_repo, fake_foxhunt, hook_id):
    files, expected = OFFENDING[hook_id]
    if hook_id == "registry-snapshot":
        fake_foxhunt("registry/isv.toml: slot 'tau' moved from 3 to 4", 1)
    for name, text in files.items():
        plugin_repo.write(name, text)
    plugin_repo.git("add", *files)

    result = plugin_repo.pre_commit("run", hook_id, "--files", *files)

    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout.splitlines(), result.stdout


def test_a_clean_change_passes_every_hook(plugin_repo):
    plugin_repo.write("huber.py", 'LOSS = LossComponent(name="huber", budget=1.0, loss=abs, description="x")\n')
    plugin_repo.write("spread.py", CLEAN_PY.replace("1e-4", "2e-4"))
    plugin_repo.git("add", "huber.py", "spread.py")

    result = plugin_repo.pre_commit("run", "--files", "huber.py", "spread.py")

    assert result.returncode == 0, result.stdout + result.stderr
    for hook in MANIFEST:
        if "manual" not in hook.get("stages", []):
            assert any(line.startswith(hook["name"]) and line.endswith("Passed") for line in result.stdout.splitlines())


def test_the_installed_git_hook_blocks_the_commit_and_lets_the_fix_through(plugin_repo):
    assert plugin_repo.pre_commit("install").returncode == 0
    plugin_repo.write("fees.py", f"COMMISSION = 2.5  # {TODO_WORD} per venue\n")

    blocked = plugin_repo.commit_all("add fees")

    assert blocked.returncode == 1
    # git hands a hook's output to stderr.
    assert OFFENDING["no-deferred-work"][1] in blocked.stderr.splitlines(), blocked.stdout + blocked.stderr
    assert plugin_repo.git("log", "--format=%s") == "base\n"

    plugin_repo.write("fees.py", "COMMISSION = 2.5  # per contract, every venue\n")
    allowed = plugin_repo.commit_all("add fees")

    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert plugin_repo.git("log", "--format=%s") == "add fees\nbase\n"


def test_the_published_manifest_works_from_a_plugin_repository(repo, make_repo, fake_foxhunt):
    # A copy of the hook programs and manifest, committed, stands in for the published foxhunt repository.
    published = make_repo("foxhunt")
    shutil.copytree(HOOKS_DIR, published.root / "hooks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO_ROOT / ".pre-commit-hooks.yaml", published.root)
    assert published.commit_all("hooks").returncode == 0
    rev = published.git("rev-parse", "HEAD").strip()

    ids = [{"id": hook["id"]} for hook in MANIFEST]
    config = {"repos": [{"repo": str(published.root), "rev": rev, "hooks": ids}]}
    repo.write(".pre-commit-config.yaml", json.dumps(config, indent=2))
    repo.write("docs/audits/components.md", AUDIT_TABLE)
    repo.write("ckpt.py", "def migrate_isv_layout(blob):\n    return blob\n")
    repo.git("add", "-A")
    fake_foxhunt("registry/ is up to date", 0)

    blocked = repo.pre_commit("run", "--all-files")

    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert OFFENDING["no-layout-migration"][1] in blocked.stdout.splitlines(), blocked.stdout

    repo.write("ckpt.py", "def load_checkpoint(blob):\n    return blob\n")
    repo.git("add", "-A")
    allowed = repo.pre_commit("run", "--all-files")

    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_this_repositorys_own_config_runs_from_a_fresh_checkout(repo, fake_foxhunt):
    # What a fresh clone of foxhunt has: the config and the hook programs, run as `python -m hooks.<name>`.
    shutil.copy2(REPO_ROOT / ".pre-commit-config.yaml", repo.root)
    shutil.copytree(HOOKS_DIR, repo.root / "hooks", ignore=shutil.ignore_patterns("__pycache__"))
    repo.write("docs/audits/components.md", AUDIT_TABLE)
    repo.write("foxhunt/fees.py", f"COMMISSION = 2.5  # {TODO_WORD}\n")
    repo.git("add", "-A")
    fake_foxhunt("registry/ is up to date", 0)

    # CI's invocation: whole files, manual-stage hooks included.
    blocked = repo.pre_commit("run", "--all-files", "--hook-stage", "manual")

    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    marker = "foxhunt/fees.py:1: deferred-work marker '" + TODO_WORD + "'"
    assert sum(line.startswith(marker) for line in blocked.stdout.splitlines()) == 2, blocked.stdout

    repo.write("foxhunt/fees.py", "COMMISSION = 2.5\n")
    repo.git("add", "-A")
    allowed = repo.pre_commit("run", "--all-files", "--hook-stage", "manual")

    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
