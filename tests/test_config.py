"""Config loading: defaults, then a TOML file, then ``--set``; every error names its source and key path."""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainer_testkit import invoke

from foxhunt.config import FoxhuntConfig, RunConfig, dump_config, load_config
from foxhunt.config_loading import apply_overrides, parse_override
from foxhunt.errors import ConfigError
from foxhunt.profiles import PROFILES
from foxhunt.plugin.host import PluginSelection

UNKNOWN = "unknown key (check the spelling; `foxhunt config show` lists every key)"


def config_error(path: Path | None = None, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, overrides)
    return str(caught.value)


@pytest.fixture
def toml(tmp_path: Path):
    def write(text: str) -> Path:
        path = tmp_path / "run.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


# -- the three kinds of error, from a file and from --set ---------------------------
CASES = [  # (section, key, TOML value, reason)
    ("run", "sed", "1", UNKNOWN),
    ("run", "seed", '"abc"', "expected an integer, got str 'abc'"),
    ("run", "seed", "1.5", "expected an integer, got float 1.5"),
    ("run", "seed", "true", "expected an integer, got bool True"),
    ("run", "device", "1", "expected a string, got int 1"),
    ("plugins", "only", '"thirdparty"', "expected a list, got str 'thirdparty'"),
    ("run", "seed", "-1", "'seed' must be >= 0: -1"),
    ("run", "device", '"tpu"', "'device' must be in ('auto', 'cpu', 'cuda') (got 'tpu')"),
    ("plugins", "require", '{x = "two"}', "plugin 'x': 'two' is not a version specifier (e.g. '>=0.2,<1')"),
]
IDS = ["unknown-key", "str-for-int", "float-for-int", "bool-for-int", "int-for-str", "str-for-list",
       "validator-ge", "validator-in", "validator-specifier"]


@pytest.mark.parametrize(("section", "key", "value", "reason"), CASES, ids=IDS)
def test_file_errors_name_the_file_and_key_path(toml, section: str, key: str, value: str, reason: str) -> None:
    path = toml(f"[{section}]\n{key} = {value}\n")
    assert config_error(path) == f"invalid configuration:\n  {path}: {section}.{key}: {reason}"


@pytest.mark.parametrize(("section", "key", "value", "reason"), CASES, ids=IDS)
def test_set_errors_name_the_override_and_key_path(section: str, key: str, value: str, reason: str) -> None:
    override = f"{section}.{key}={value}"
    assert config_error(None, (override,)) == f"invalid configuration:\n  --set {override}: {section}.{key}: {reason}"


def test_unknown_section_and_every_unknown_key_are_listed(toml) -> None:
    path = toml("[trian]\nepochs = 3\n[run]\nsed = 1\n[plugins]\nenabel = []\n")
    assert sorted(config_error(path).splitlines()[1:]) == [
        f"  {path}: plugins.enabel: {UNKNOWN}",
        f"  {path}: run.sed: {UNKNOWN}",
        f"  {path}: trian: {UNKNOWN}",
    ]


def test_wrong_type_inside_a_list_names_the_index(toml) -> None:
    path = toml('[plugins]\nonly = ["a", 3]\n')
    assert config_error(path) == f"invalid configuration:\n  {path}: plugins.only[1]: expected a string, got int 3"


def test_bad_toml_syntax_names_the_file_line_and_column(toml) -> None:
    path = toml("[run\nseed = 1\n")
    message = config_error(path)
    assert message.startswith(f"{path}: not valid TOML: ")
    assert "(at line 1, column 5)" in message


def test_a_config_that_is_not_utf8_is_one_paragraph_naming_the_file_and_line(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes("[run]\nseed = 1\n# café\n".encode("latin-1"))
    assert config_error(latin1) == (f"{latin1}: line 3: byte 0xe9 is not UTF-8 text, and TOML files must be UTF-8. "
                                    "Save the file as UTF-8 and run again")
    utf16 = tmp_path / "utf16.toml"
    utf16.write_bytes("[run]\nseed = 1\n".encode("utf-16"))
    assert config_error(utf16).startswith(f"{utf16}: line 1: byte 0xff is not UTF-8 text")
    bom = tmp_path / "bom.toml"
    bom.write_bytes("[run]\nseed = 7\n".encode("utf-8-sig"))  # UTF-8 with a Windows byte-order mark loads
    assert load_config(bom).run.seed == 7
    with pytest.raises(ConfigError, match=f"{tmp_path}: cannot read the config file: Is a directory"):
        load_config(tmp_path)


def test_foxhunt_train_with_a_non_utf8_config_exits_2_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "cp1252.toml"
    path.write_bytes(b"[data]\nsource = \"\x93quoted\x94.csv\"\n")
    result = invoke("train", "--config", str(path), "--out", str(tmp_path / "run"), "--no-progress")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.strip() == f"error: {path}: line 2: byte 0x93 is not UTF-8 text, and TOML files must be UTF-8. " \
                                    "Save the file as UTF-8 and run again"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("text", "reason"), [
    ("x = " + "[" * 5000 + "]" * 5000, "arrays or inline tables nested too deep to read"),
    ("x = " + "{a=" * 5000 + "1" + "}" * 5000, "arrays or inline tables nested too deep to read"),
    ("[run]\nseed = " + "9" * 5000, "a number too long to read"),
])  # fmt: skip
def test_toml_that_python_cannot_read_is_one_paragraph(toml, text: str, reason: str) -> None:
    """Found by fuzzing: RecursionError and a ValueError without a line came out as tracebacks."""
    path = toml(text)
    assert config_error(path).startswith(f"{path}: not valid TOML: {reason}")


def test_a_set_value_python_cannot_read_is_one_paragraph() -> None:
    assert "a number too long to read" in config_error(None, ("run.seed=" + "9" * 5000,))
    assert "nested too deep" in config_error(None, ("learner.hidden=" + "[" * 5000,))


def test_missing_file_is_named(tmp_path: Path) -> None:
    assert config_error(tmp_path / "absent.toml") == f"{tmp_path / 'absent.toml'}: config file not found"


def test_a_file_error_is_reported_even_when_set_would_fix_it(toml) -> None:
    path = toml("[run]\nseed = -4\n")
    assert config_error(path, ("run.seed=1",)) == f"invalid configuration:\n  {path}: run.seed: 'seed' must be >= 0: -4"


def test_set_error_after_a_good_file_names_both(toml) -> None:
    path = toml("[run]\nseed = 3\n")
    assert config_error(path, ("run.seed=-2",)) == (
        f"invalid configuration:\n  {path} + --set run.seed=-2: run.seed: 'seed' must be >= 0: -2"
    )


@pytest.mark.parametrize("override", ["seed", "=1", "run..seed=1", "run.=1"])
def test_malformed_set_says_what_is_expected(override: str) -> None:
    assert config_error(None, (override,)) == (
        f"--set {override!r}: expected KEY=VALUE with a dotted key, e.g. --set learner.lr=3e-4"
    )


def test_set_below_a_value_is_refused(toml) -> None:
    path = toml("[run]\nseed = 3\n")
    assert config_error(path, ("run.seed.low=1",)) == "--set 'run.seed.low=1': run.seed is a value, not a section"


def test_the_removed_batched_grad_mode_is_refused_saying_what_to_use(toml) -> None:
    message = config_error(toml('[learner]\ngrad_mode = "batched"\n'), ())
    assert 'learner.grad_mode = "batched" was removed' in message
    assert 'Use "loop" (the default, the same gradients), and [learner] compile = true' in message
    assert 'docs/learner.md, "Performance"' in message
    assert load_config(None, ('learner.grad_mode="loop"',)).learner.grad_mode == "loop"  # what every saved config names


# -- resolution -------------------------------------------------------------------
def test_defaults_then_file_then_set(toml) -> None:
    # a CPU run gets the class defaults plus the CPU profile's values; the resolved profile name is recorded
    config = load_config(None, ['run.device="cpu"'])
    assert config.run == RunConfig(device="cpu", profile="cpu")
    assert (config.env, config.folds, config.data) == (FoxhuntConfig().env, FoxhuntConfig().folds, FoxhuntConfig().data)
    assert config.learner.batch_size == PROFILES["cpu"]["learner.batch_size"]
    assert config.plugins.settings == {}  # the profile's plugin values are defaults beneath any section
    assert config.plugins.profile_settings["mirror"] == {"fraction": PROFILES["cpu"]["plugins.mirror.fraction"]}
    path = toml('[run]\nseed = 3\ndevice = "cpu"\n[plugins]\ndisable = ["noisy"]\nrequire = {core = ">=0.1"}\n')
    config = load_config(path, ("run.seed=7",))
    assert config.run == RunConfig(seed=7, device="cpu", profile="cpu")
    assert config.plugins == PluginSelection(disable=("noisy",), require={"core": ">=0.1"})


def test_integral_float_is_an_integer(toml) -> None:
    assert load_config(toml("[run]\nseed = 2.0\n")).run.seed == 2


def test_set_values_are_read_as_toml_else_as_strings() -> None:
    assert parse_override("learner.lr=3e-4") == (["learner", "lr"], 0.0003)
    assert parse_override("run.device = cpu") == (["run", "device"], "cpu")
    assert parse_override('plugins.only=["a","b"]') == (["plugins", "only"], ["a", "b"])
    assert parse_override("x.flag=false") == (["x", "flag"], False)
    data = {"run": {"seed": 1}}
    assert apply_overrides(data, ["run.device=cpu", "plugins.only=[]"]) == {
        "run": {"seed": 1, "device": "cpu"}, "plugins": {"only": []},
    }
    assert data == {"run": {"seed": 1}}


configs = st.builds(
    FoxhuntConfig,
    # a dumped config is a resolved one: its profile is concrete ("auto" is resolved when it is loaded)
    run=st.builds(RunConfig, seed=st.integers(0, 2**31), device=st.sampled_from(["auto", "cpu", "cuda"]),
                  profile=st.sampled_from(["cpu", "gpu"]), tf32=st.booleans(), cuda_graph=st.booleans(),
                  tensorboard=st.booleans(), devices=st.integers(1, 8)),
    plugins=st.builds(
        PluginSelection,
        only=st.lists(st.sampled_from(["a", "b.c", "thirdparty"]), unique=True),
        disable=st.lists(st.sampled_from(["x", "y"]), unique=True),
        require=st.dictionaries(st.sampled_from(["a", "z"]), st.sampled_from([">=1", "==0.2.1", ">=0.1,<2"])),
    ),
)


@given(configs)
def test_dumped_config_loads_back_to_itself(config: FoxhuntConfig) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "config.toml"
        path.write_text(dump_config(config), encoding="utf-8")
        assert load_config(path) == config


def test_run_devices_defaults_to_one_and_refuses_zero() -> None:
    """``[run] devices`` (docs/multi-device.md): 1 is the one-process run; fewer than one device is refused."""
    assert RunConfig().devices == 1
    assert load_config(None, ["run.devices=2"]).run.devices == 2
    with pytest.raises(ConfigError, match="run.devices"):
        load_config(None, ["run.devices=0"])
