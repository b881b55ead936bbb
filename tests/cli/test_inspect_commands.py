"""The inspection commands, run in-process: --version, plugins, layout, registry, config, and --help everywhere.

Commands that compose the layout run with ``[plugins] only = ["foxhunt"]`` (the
core alone), so these tests check the commands, not whichever built-in plugins
are installed at the moment.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import click
import pytest
import torch

from foxhunt import ISV, PluginHost, PluginSelection, __version__
from foxhunt.checkpoint import METADATA_FILE, save_checkpoint
from foxhunt.cli.main import cli
from foxhunt.errors import ConfigError
from foxhunt.tooling.snapshots import SNAPSHOT_FILES

CORE_ONLY = ("--set", 'plugins.only=["foxhunt"]')


@pytest.fixture(scope="module")
def core_layout():
    host = PluginHost(PluginSelection(only=["foxhunt"])).discover().declare()
    return host.freeze().layout


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


# -- version and help -----------------------------------------------------------------
def test_version(run) -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == f"foxhunt {__version__}\n"


def test_verbose_version_lists_plugins_with_distribution_and_location(run) -> None:
    result = run("--version", "-v")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"foxhunt {__version__}"
    (core,) = [line for line in lines[1:] if line.split()[0] == "foxhunt"]
    assert f"foxhunt {__version__}" in core and "loaded" in core and "core_declarations.py" in core


def test_bare_command_prints_help(run) -> None:
    result = run()
    assert result.exit_code == 0
    assert "foxhunt trains distributional RL trading agents" in result.stdout
    for name in ("plugins", "layout", "registry", "config"):
        assert name in result.stdout


@pytest.mark.parametrize("path", [path for path, _ in _commands(cli)], ids=" ".join)
def test_every_command_has_help_that_teaches(run, path: tuple[str, ...]) -> None:
    command = dict(_commands(cli))[path]
    result = run(*path, "--help")
    assert result.exit_code == 0
    assert f"Usage: foxhunt {' '.join(path)}" in result.stdout
    summary = (command.help or "").strip().splitlines()[0]
    assert len(summary) > 20
    assert summary.split()[0] in result.stdout


# -- plugins ----------------------------------------------------------------------------
def test_plugins_list_json_has_the_documented_fields(run) -> None:
    result = run("plugins", "list", "--json")
    assert result.exit_code == 0
    plugins = json.loads(result.stdout)
    assert isinstance(plugins, list) and plugins
    for entry in plugins:
        assert {"name", "distribution", "version", "hooks", "status", "location", "error"} <= set(entry)
        assert entry["status"] in {"loaded", "disabled", "failed"}
    (core,) = [entry for entry in plugins if entry["name"] == "foxhunt"]
    assert (core["distribution"], core["version"], core["status"]) == ("foxhunt", __version__, "loaded")
    assert core["hooks"] == ["foxhunt_declare"]


def test_plugins_list_table(run) -> None:
    result = run("plugins", "list", *CORE_ONLY)
    assert result.exit_code == 0
    assert "foxhunt plugins" in result.stdout
    assert re.search(r"foxhunt\s.*loaded", result.stdout)


def test_plugins_inspect_shows_what_a_plugin_declared(run) -> None:
    result = run("plugins", "inspect", "foxhunt", *CORE_ONLY)
    assert result.exit_code == 0
    out = result.stdout
    assert f"foxhunt  foxhunt {__version__}  (loaded)" in out
    assert "hooks: foxhunt_declare" in out
    assert "ISV slots (2):" in out
    assert "train.progress width=1 offset=0 init=0.0" in out
    assert "state entries (2):" in out
    assert "train.progress [fold-reset]" in out
    assert "isv.fingerprint [schema-contract]" in out


def test_plugins_inspect_shows_the_plugins_settings_and_what_differs_from_its_defaults(run) -> None:
    result = run("plugins", "inspect", "gamma", "--set", "plugins.gamma.minimum=[0.9, 0.9, 0.8, 0.8]")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("  settings [plugins.gamma]:")
    assert lines[start + 1:start + 3] == [
        "    minimum = [0.9, 0.9, 0.8, 0.8]  (default [0.95, 0.95, 0.9, 0.9])",
        "    maximum = [0.99, 0.99, 0.97, 0.97]",
    ]
    assert "  settings: -" in run("plugins", "inspect", "foxhunt", *CORE_ONLY).stdout


def test_plugins_inspect_unknown_name(run) -> None:
    result = run("plugins", "inspect", "ghost")
    assert result.exit_code == 2
    assert "no plugin named 'ghost'; see `foxhunt plugins list`" in result.stderr


# -- layout -----------------------------------------------------------------------------
def test_layout_show_json(run, core_layout) -> None:
    result = run("layout", "show", "--json", *CORE_ONLY)
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert re.fullmatch(r"[0-9a-f]{16}", data["fingerprint"])
    assert data["fingerprint"] == core_layout.fingerprint_hex
    assert data["size"] == core_layout.size
    cursor = 0
    for slot in data["slots"]:
        assert {"name", "offset", "width", "owner"} <= set(slot)
        assert slot["offset"] == cursor
        cursor += slot["width"]
    assert cursor == data["size"]
    assert [s["name"] for s in data["slots"]] == ["train.progress", "isv.fingerprint"]
    assert {s["owner"] for s in data["slots"]} == {"foxhunt"}


def test_layout_show_table(run, core_layout) -> None:
    result = run("layout", "show", *CORE_ONLY)
    assert result.exit_code == 0
    assert f"ISV layout {core_layout.fingerprint_hex}" in result.stdout
    assert "train.progress" in result.stdout


def test_layout_show_reads_a_config_file(run, tmp_path: Path, core_layout) -> None:
    config = tmp_path / "core.toml"
    config.write_text('[plugins]\nonly = ["foxhunt"]\n')
    result = run("layout", "show", "--json", "--config", str(config))
    assert json.loads(result.stdout)["fingerprint"] == core_layout.fingerprint_hex


@pytest.fixture
def checkpoint(tmp_path: Path, core_layout) -> Path:
    return save_checkpoint(tmp_path / "ckpt", {"isv": ISV(core_layout).tensor}, {"seed": 0}, core_layout)


def test_layout_diff_matching_checkpoint_exits_0(run, checkpoint: Path, core_layout) -> None:
    result = run("layout", "diff", str(checkpoint), *CORE_ONLY)
    assert result.exit_code == 0
    fp = core_layout.fingerprint_hex
    assert result.stdout == f"checkpoint fingerprint {fp}, current {fp}\nlayouts match\n"


def test_layout_diff_other_layout_exits_1_with_the_slot_diff(run, checkpoint: Path) -> None:
    meta_path = checkpoint / METADATA_FILE
    meta = json.loads(meta_path.read_text())
    meta["isv"]["slots"] = [s for s in meta["isv"]["slots"] if s["name"] != "train.progress"]
    meta_path.write_text(json.dumps(meta))
    result = run("layout", "diff", str(meta_path), *CORE_ONLY)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[1:] == ["+train.progress width=1 owner=foxhunt"]  # the offsets it shifts are not differences


def test_layout_diff_forged_fingerprint_exits_1(run, checkpoint: Path) -> None:
    meta_path = checkpoint / METADATA_FILE
    meta = json.loads(meta_path.read_text())
    meta["isv"]["fingerprint"] = "0123456789abcdef"
    meta_path.write_text(json.dumps(meta))
    result = run("layout", "diff", str(checkpoint), *CORE_ONLY)
    assert result.exit_code == 1
    assert result.stdout.startswith("checkpoint fingerprint 0123456789abcdef, current ")


# -- registry ----------------------------------------------------------------------------
def test_registry_lock_is_deterministic_and_check_passes_on_its_output(run, tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    result = run("registry", "lock", "--dir", str(first))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"wrote {first / name}" for name in SNAPSHOT_FILES]
    assert run("registry", "lock", "--dir", str(second)).exit_code == 0
    for name in SNAPSHOT_FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes()
    check = run("registry", "check", "--dir", str(first))
    assert check.exit_code == 0
    assert check.stdout == f"registry snapshots in {first} match the code\n"
    layout = tomllib.loads((first / "isv_layout.toml").read_text())
    assert layout["fingerprint"] == PluginHost.builtin().discover().declare().freeze().layout.fingerprint_hex
    assert (first / "isv_layout.toml").read_text().startswith("# Generated by `foxhunt registry lock`")


def test_registry_check_fails_with_a_diff_when_a_snapshot_is_stale(run, tmp_path: Path) -> None:
    directory = tmp_path / "registry"
    run("registry", "lock", "--dir", str(directory))
    path = directory / "isv_layout.toml"
    path.write_text(path.read_text().replace('name = "train.progress"', 'name = "train.progres"'))
    result = run("registry", "check", "--dir", str(directory))
    assert result.exit_code == 1
    assert f"--- {path} (committed)" in result.stdout
    assert f"+++ {path} (from code)" in result.stdout
    assert '-name = "train.progres"' in result.stdout.splitlines()
    assert '+name = "train.progress"' in result.stdout.splitlines()
    assert "registry snapshots are out of date: review the diff, then run `foxhunt registry lock`" in result.stderr


def test_registry_check_fails_when_snapshots_are_missing(run, tmp_path: Path) -> None:
    result = run("registry", "check", "--dir", str(tmp_path / "empty"))
    assert result.exit_code == 1
    assert "(from code)" in result.stdout


# -- config ------------------------------------------------------------------------------
def test_config_show_prints_the_resolved_toml(run) -> None:
    result = run("config", "show", "--set", "run.seed=7")
    assert result.exit_code == 0
    assert "seed = 7" in result.stdout.splitlines()
    resolved = tomllib.loads(result.stdout)
    profile = "gpu" if torch.cuda.is_available() else "cpu"  # device "auto" follows the machine
    assert resolved["run"] == {"seed": 7, "device": "auto", "threads": 1, "profile": profile, "tf32": True,
                               "cuda_graph": True, "tensorboard": False, "devices": 1}
    assert {key: resolved["plugins"][key] for key in ("only", "disable", "require")} == {
        "only": [], "disable": [], "require": {}}


def test_config_show_prints_every_plugins_settings_resolved_with_defaults(run) -> None:
    result = run("config", "show", "--set", "plugins.iqn.kappa=2.5", "--set", "plugins.static.cql_alpha=0")
    assert result.exit_code == 0, result.output
    plugins = tomllib.loads(result.stdout)["plugins"]
    assert plugins["iqn"] == {"kappa": 2.5}
    assert plugins["static"] == {"cql_alpha": 0.0}
    assert plugins["c51"] == {"label_smoothing_max": 0.1}  # no table given: the plugin's defaults
    assert plugins["ensemble"] == {"diversity": 0.5, "bootstrap": 1.0}
    assert plugins["tau"] == {"start": 0.01, "end": 0.001, "floor_min": 0.001, "floor_max": 0.005}
    assert "[plugins.iqn]\nkappa = 2.5\n" in result.stdout
    assert "learner" in tomllib.loads(result.stdout) and "kappa" not in tomllib.loads(result.stdout)["learner"]


def test_config_show_json_has_the_plugins_settings(run) -> None:
    result = run("config", "show", "--json", "--set", "plugins.gamma.minimum=[0.9, 0.9, 0.8, 0.8]")
    assert json.loads(result.stdout)["plugins"]["gamma"] == {"minimum": [0.9, 0.9, 0.8, 0.8],
                                                             "maximum": [0.99, 0.99, 0.97, 0.97]}


def test_config_show_refuses_a_bad_plugin_table_like_a_run(run) -> None:
    result = run("config", "show", "--set", "plugins.iqn.kapa=2")
    assert result.exit_code == 2
    assert "plugins.iqn.kapa: unknown key; the settings of plugin 'iqn' are kappa" in result.stderr
    assert "[iqn from foxhunt " in result.stderr


def test_config_show_names_the_new_key_of_a_moved_one(run) -> None:
    result = run("config", "show", "--set", "learner.label_smoothing_max=0.2")
    assert result.exit_code == 2
    assert "learner.label_smoothing_max: this key moved to plugins.c51.label_smoothing_max" in result.stderr


def test_config_show_json(run, tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('[run]\ndevice = "cpu"\n')
    result = run("config", "show", "--json", "--config", str(config), "--set", "run.seed=3")
    assert json.loads(result.stdout)["run"] == {"seed": 3, "device": "cpu", "threads": 1, "profile": "cpu",
                                                "tf32": True, "cuda_graph": True, "bands": None,
                                                "tensorboard": False, "devices": 1}


def test_config_show_resolves_the_gpu_profile_for_a_cuda_run(run) -> None:
    result = run("config", "show", "--set", 'run.device="cuda"', "--set", "learner.batch_size=4096")
    assert result.exit_code == 0, result.output
    resolved = tomllib.loads(result.stdout)
    assert resolved["run"]["profile"] == "gpu"
    assert resolved["env"]["n_envs"] == 4096
    assert resolved["learner"]["compile"] is True
    assert resolved["learner"]["batch_size"] == 4096  # what the user set wins over the profile
    assert resolved["train"]["updates_per_epoch"] == 250


def test_config_show_keeps_cpu_sizes_for_a_cpu_run(run) -> None:
    resolved = tomllib.loads(run("config", "show", "--set", 'run.device="cpu"').stdout)
    assert resolved["run"]["profile"] == "cpu"
    assert resolved["env"]["n_envs"] == 64
    assert resolved["learner"]["batch_size"] == 256
    assert resolved["learner"]["compile"] is False
    # the CPU profile's plugin values show as each plugin's resolved settings; the class defaults elsewhere
    assert resolved["plugins"]["mirror"]["fraction"] == 0.45
    assert resolved["plugins"]["epsilon"]["decay_fraction"] == 0.57
    gpu = tomllib.loads(run("config", "show", "--set", 'run.device="cuda"').stdout)
    assert gpu["plugins"]["mirror"]["fraction"] == 0.25


def test_config_show_gives_no_profile_value_to_a_disabled_plugin(run) -> None:
    result = run("config", "show", "--set", 'run.device="cpu"', "--set", 'plugins.disable=["mirror"]')
    assert result.exit_code == 0, result.output + result.stderr
    assert "mirror" not in tomllib.loads(result.stdout)["plugins"]


def test_config_errors_are_one_paragraph_naming_the_key_path(run, tmp_path: Path) -> None:
    result = run("config", "show", "--set", "run.seed=-1")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == "error: invalid configuration:\n  --set run.seed=-1: run.seed: 'seed' must be >= 0: -1\n"
    config = tmp_path / "bad.toml"
    config.write_text("[run]\nsede = 1\n")
    result = run("layout", "show", "--config", str(config))
    assert result.exit_code == 2
    assert f"{config}: run.sede: unknown key" in result.stderr
    assert "Traceback" not in result.stderr


def test_debug_flag_lets_the_exception_through(run) -> None:
    result = run("--debug", "config", "show", "--set", "run.device=tpu")
    assert isinstance(result.exception, ConfigError)
    assert "run.device: 'device' must be in ('auto', 'cpu', 'cuda') (got 'tpu')" in str(result.exception)

