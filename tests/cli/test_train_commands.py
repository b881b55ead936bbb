"""``foxhunt train``, ``backtest``, ``report`` and ``datasets list`` end to end, in-process.

One tiny run (two folds of two epochs on an 800-bar planted market) is trained
once for the module; every artifact of its run directory is checked, and the
other commands are run against it.
"""

from __future__ import annotations

import base64
import csv
import json
import math
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs
import pytest

from foxhunt import __version__
from foxhunt.checkpoint import load_checkpoint, seal_metadata
from foxhunt.cli.common import frozen_host
from foxhunt.config import load_config
from foxhunt.data import load
from foxhunt.trainer.evaluation import POLICIES, SUMMARY_KEYS

import trainer_testkit as kit

BUILT_IN_PLUGINS = (
    "market_env", "c51", "mse", "cql", "iqn", "ensemble", "health", "tau", "gamma", "epsilon", "support",
    "grad_balance", "static", "diagnostics",
)


pytestmark = pytest.mark.usefixtures("_private_feature_cache")  # tests/cli/conftest.py


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> tuple[Path, Any]:
    """The module's one run: its directory and the CLI result."""
    out = tmp_path_factory.mktemp("train") / "run"
    result = kit.invoke(*kit.train_args(out))
    assert result.exit_code == 0, result.output
    return out, result


@pytest.fixture(scope="module")
def run_dir(trained: tuple[Path, Any]) -> Path:
    return trained[0]


@pytest.fixture(scope="module")
def summary(run_dir: Path) -> dict[str, Any]:
    return kit.read_summary(run_dir)


def expected_config():
    overrides = [*kit.TINY, f'data.source="{kit.TINY_DATA}"']
    config = load_config(None, overrides)
    return attrs.evolve(config, run=attrs.evolve(config.run, device="cpu"))


# -- foxhunt train: the run directory ------------------------------------------------------------


def test_train_prints_the_summary_table_and_the_run_directory(trained: tuple[Path, Any]) -> None:
    run_dir, result = trained
    assert "buy and hold" in result.stdout
    test_title, validation_title = result.stdout.index("TEST (out of sample"), result.stdout.index("validation (the window")
    assert test_title < validation_title  # the reported figure first, the selection window apart and labelled
    words = " ".join(result.stdout.split())  # rich wraps the table to the terminal's width
    assert "fills" in words and "round trips" in words and "trades" not in words
    assert "fills: bars on which an order filled; round trips: positions closed or reversed" in words
    assert str(run_dir) in result.stdout.replace("\n", "")
    assert "Traceback" not in result.output


def test_config_toml_loads_back_to_the_config_that_ran(run_dir: Path) -> None:
    assert load_config(run_dir / "config.toml") == expected_config()


def test_plugins_json_names_every_built_in_plugin_with_its_version(run_dir: Path) -> None:
    plugins = json.loads((run_dir / "plugins.json").read_text(encoding="utf-8"))
    host, _ = frozen_host(expected_config())
    assert plugins == host.versions()
    for name in BUILT_IN_PLUGINS:
        assert plugins[name] == {"distribution": "foxhunt", "version": __version__}


def test_metrics_jsonl_has_one_complete_line_per_fold_and_epoch(run_dir: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(row["fold"], row["epoch"]) for row in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    losses = {"c51", "cql", "ensemble", "iqn", "mse"}
    for row in rows:
        assert set(row["losses"]) == losses
        assert set(row["grad_norms"]) == losses | {"combined"}
        for value in (*row["losses"].values(), *row["grad_norms"].values()):
            assert math.isfinite(value)
        assert 0.0 < row["adaptive"]["tau.value"] < 1.0
        assert len(row["adaptive"]["gamma.branch"]) == 4
        assert 0.0 <= row["adaptive"]["health.value"] <= 1.0
        assert set(row["validation"]) >= set(SUMMARY_KEYS)
        assert row["env_steps_per_s"] > 0 and row["updates_per_s"] > 0
        assert sum(row["actions"]["DIRECTION"].values()) == 96  # env_steps_per_epoch (12 vector steps x 8 envs)
        assert {snapshot["name"] for snapshot in row["diagnostics"]} >= {"health", "tau", "gradients"}


def test_fold_checkpoints_load_against_the_current_layout(run_dir: Path, summary: dict[str, Any]) -> None:
    _, registries = frozen_host(expected_config())
    for fold in (0, 1):
        tensors, metadata = load_checkpoint(run_dir / "checkpoints" / f"fold_{fold}", registries.layout)
        assert metadata["kind"] == "policy"
        assert metadata["fold"] == fold
        assert metadata["epoch"] == summary["folds"][fold]["best_epoch"]
        assert metadata["validation"] == summary["folds"][fold]["validation"]["agent"]
        for window in ("train", "validation", "test"):
            assert metadata[f"{window}_window"] == summary["folds"][fold][f"{window}_window"]
        assert metadata["isv"]["fingerprint"] == registries.layout.fingerprint_hex
        assert metadata["seed"] == 0 and metadata["data_hash"] == summary["data_hash"]
        assert tensors["isv"].shape == (registries.layout.size,)
        assert any(name.startswith("learner.") for name in tensors)
    assert not (run_dir / "checkpoints" / "resume").exists()  # only a stopped run leaves one


@pytest.mark.parametrize(("window", "name"), [("test", "fold_{}.csv"), ("validation", "fold_{}_validation.csv")])
def test_equity_csv_has_every_bar_of_each_window_and_policy(run_dir: Path, summary: dict[str, Any], window: str,
                                                            name: str) -> None:
    stamps = load(kit.TINY_DATA).timestamps.astype(str)
    for fold in summary["folds"]:
        with open(run_dir / "equity" / name.format(fold["fold"]), newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        start, stop = fold[f"{window}_window"]
        # Row i is the equity after bar start + i of the window (row 0: the initial cash, at the first bar).
        assert [row["timestamp"] for row in rows] == list(stamps[start:stop])
        assert list(rows[0]) == ["timestamp", "agent", "buy_and_hold", "flat"]
        for policy in POLICIES:
            curve = [float(row[policy]) for row in rows]
            assert curve[-1] - curve[0] == pytest.approx(fold[window][policy]["net_pnl"], rel=1e-9, abs=1e-6)
        assert {float(row["flat"]) for row in rows} == {float(rows[0]["flat"])}


def test_summary_has_every_metric_per_fold_and_overall(summary: dict[str, Any]) -> None:
    assert len(summary["folds"]) == 2
    sections = [*(f[window] for f in summary["folds"] for window in ("validation", "test")),
                summary["overall"], summary["validation_overall"]]
    for section in sections:
        for policy in POLICIES:
            assert set(section[policy]) >= set(SUMMARY_KEYS)
            assert all(math.isfinite(section[policy][key]) for key in SUMMARY_KEYS)
    for overall, window in ((summary["overall"], "test"), (summary["validation_overall"], "validation")):
        assert overall["flat"]["net_pnl"] == 0.0
        assert overall["agent"]["net_pnl"] == pytest.approx(sum(f[window]["agent"]["net_pnl"] for f in summary["folds"]))
    for fold in summary["folds"]:  # buy-and-hold enters once and never closes: turnover with no round trip
        assert fold["test"]["buy_and_hold"]["fills"] == 1 and fold["test"]["buy_and_hold"]["round_trips"] == 0
        assert fold["test"]["flat"]["fills"] == fold["test"]["flat"]["round_trips"] == 0
        assert fold["test"]["agent"]["fills"] >= fold["test"]["agent"]["round_trips"]
    assert summary["overall"]["buy_and_hold"]["fills"] == 2 and "trades" not in summary["overall"]["agent"]
    first, second = summary["folds"]
    for fold in (first, second):
        assert fold["train_window"][1] <= fold["validation_window"][0]
        assert fold["validation_window"][1] <= fold["test_window"][0]
    assert first["test_window"][1] == second["test_window"][0]
    assert second["test_window"][1] == len(load(kit.TINY_DATA))  # the last test window ends at the last bar


class _Document(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attributes)))


def check_report(path: Path) -> list[bytes]:
    """Parse a report; returns its embedded images after checking it needs no network."""
    text = path.read_text(encoding="utf-8")
    document = _Document()
    document.feed(text)
    document.close()
    names = [tag for tag, _ in document.tags]
    assert names[:1] == ["html"] and "body" in names and "table" in names
    images = []
    for tag, attributes in document.tags:
        for key in ("src", "href"):
            if attributes.get(key) is not None:
                assert attributes[key].startswith("data:"), f"<{tag} {key}={attributes[key][:60]}> reaches outside the file"
        if tag == "img":
            source = attributes["src"]
            assert source.startswith("data:image/png;base64,")
            images.append(base64.b64decode(source.removeprefix("data:image/png;base64,"), validate=True))
    assert "http://" not in text and "https://" not in text and "@import" not in text
    return images


def test_report_is_self_contained_html_with_png_plots(run_dir: Path) -> None:
    images = check_report(run_dir / "report.html")
    assert len(images) >= 2 * 2 + 3  # test and validation equity per fold, gradient norms, adaptive values, losses, actions
    assert all(image.startswith(b"\x89PNG\r\n\x1a\n") for image in images)


def test_report_command_rebuilds_the_report(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "report.html").unlink()
    result = kit.invoke("report", str(copy))
    assert result.exit_code == 0, result.output
    assert (copy / "report.html").exists()
    assert len(check_report(copy / "report.html")) == len(check_report(run_dir / "report.html"))


def test_report_of_a_summary_without_test_figures_is_a_clear_error(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    summary = kit.read_summary(copy)
    del summary["validation_overall"]  # the shape written before folds had test windows
    (copy / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    result = kit.invoke("report", str(copy))
    assert result.exit_code == 2
    assert "before folds had a test window" in result.stderr and "Traceback" not in result.output


def test_report_of_a_directory_without_a_run_is_a_clear_error(tmp_path: Path) -> None:
    result = kit.invoke("report", str(tmp_path))
    assert result.exit_code == 2
    assert "no summary.json" in result.stderr and "Traceback" not in result.output


# -- foxhunt backtest ---------------------------------------------------------------------------


@pytest.mark.parametrize(("fold", "window"), [(0, None), (1, None), (1, "validation"), (0, "test")])
def test_backtest_reproduces_the_fold_figures_of_its_window(
    run_dir: Path, summary: dict[str, Any], tmp_path: Path, fold: int, window: str | None
) -> None:
    out = tmp_path / "backtest"
    choice = [] if window is None else ["--window", window]
    result = kit.invoke("backtest", str(run_dir / "checkpoints" / f"fold_{fold}"), *choice, "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "backtest.json").read_text(encoding="utf-8"))
    expected = summary["folds"][fold]
    window = window or "test"  # the default: the window summary.json reports
    assert report["window"] == expected[f"{window}_window"] and report["window_name"] == window
    for policy in POLICIES:
        for key in SUMMARY_KEYS:
            assert report["metrics"][policy][key] == pytest.approx(expected[window][policy][key], rel=1e-9, abs=1e-9), (
                policy, key)


def test_backtest_of_a_checkpoint_without_a_test_window_says_what_to_do(run_dir: Path, tmp_path: Path) -> None:
    old = tampered_checkpoint(run_dir, tmp_path, lambda metadata: metadata.pop("test_window"))
    result = kit.invoke("backtest", str(old))
    assert result.exit_code == 2
    assert "no test window" in result.stderr and "--window validation" in result.stderr
    assert "Traceback" not in result.output
    result = kit.invoke("backtest", str(old), "--window", "validation")
    assert result.exit_code == 0, result.output
    assert "validation bars" in result.stdout


def tampered_checkpoint(run_dir: Path, tmp_path: Path, edit) -> Path:
    """A copy of fold 0's checkpoint with its metadata.json edited by ``edit``, then sealed again.

    Resealing (a fresh metadata SHA-256) makes the copy what a foxhunt writing that metadata would have
    written, so these tests reach the check they are about; unsealed edits are tests/test_checkpoint_tampering.py's.
    """
    copy = tmp_path / "fold_0"
    shutil.copytree(run_dir / "checkpoints" / "fold_0", copy)
    path = copy / "metadata.json"
    metadata = json.loads(path.read_text(encoding="utf-8"))
    edit(metadata)
    seal_metadata(metadata, metadata["integrity"]["tensors_sha256"])
    path.write_text(json.dumps(metadata), encoding="utf-8")
    return copy


def test_backtest_refuses_a_tampered_fingerprint(run_dir: Path, tmp_path: Path) -> None:
    def edit(metadata: dict[str, Any]) -> None:
        metadata["isv"]["fingerprint"] = "0123456789abcdef"

    result = kit.invoke("backtest", str(tampered_checkpoint(run_dir, tmp_path, edit)))
    assert result.exit_code == 2
    assert "fingerprint 0123456789abcdef does not match" in result.stderr
    assert "no migration" in result.stderr.lower() and "Slot diff" in result.stderr
    assert "Traceback" not in result.output


def test_backtest_refuses_a_different_layout_with_the_slot_diff(run_dir: Path, tmp_path: Path) -> None:
    def edit(metadata: dict[str, Any]) -> None:
        slot = next(s for s in metadata["isv"]["slots"] if s["name"] == "tau.value")
        slot["name"] = "tau.renamed"

    result = kit.invoke("backtest", str(tampered_checkpoint(run_dir, tmp_path, edit)))
    assert result.exit_code == 2
    assert "fingerprint" in result.stderr and "no migration" in result.stderr.lower()
    lines = result.stderr.splitlines()
    assert any(line.startswith("-tau.renamed width=1") for line in lines)
    assert any(line.startswith("+tau.value width=1") for line in lines)


@pytest.mark.parametrize(
    ("edit", "diff_line", "advice"),
    [
        (lambda plugins: plugins["tau"].update(version="0.0.1"), f"~ tau 0.0.1 -> {__version__}",
         "install foxhunt 0.0.1 for plugin 'tau'"),
        (lambda plugins: plugins.pop("gamma"), f"+ gamma {__version__} (not in the checkpoint)",
         """pass --set 'plugins.disable=["gamma"]' to load only the plugins it was trained with"""),
        (lambda plugins: plugins.update(extra={"distribution": "foxhunt-extra", "version": "1.0"}), "- extra 1.0 (missing now)",
         "install foxhunt-extra 1.0 to load plugin 'extra'"),
    ],
    ids=["version-changed", "plugin-added-since", "plugin-gone"],
)
def test_backtest_refuses_a_changed_plugin_set_with_the_diff(run_dir: Path, tmp_path: Path, edit, diff_line: str,
                                                            advice: str) -> None:
    result = kit.invoke("backtest", str(tampered_checkpoint(run_dir, tmp_path, lambda m: edit(m["plugins"]))))
    assert result.exit_code == 2
    assert "this checkpoint was trained with another plugin set:" in result.stderr
    assert diff_line in result.stderr and advice in result.stderr
    assert "ISV slots that differ" not in result.stderr  # these edits leave the saved layout as it was
    assert "Traceback" not in result.output


def test_backtest_names_a_plugin_installed_since_and_set_disables_it(run_dir: Path, site: Path, dists) -> None:
    dists.write_distribution(site, "foxhunt-thirdparty", "1.2.3", {"thirdparty": ("thirdparty_plugin", dists.THIRDPARTY_PLUGIN)})
    checkpoint = str(run_dir / "checkpoints" / "fold_0")
    refused = kit.invoke("backtest", checkpoint)
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"error: {checkpoint}: this checkpoint was trained with another plugin set:\n"
        "  + thirdparty 1.2.3 (not in the checkpoint)\n"
        "ISV slots that differ (checkpoint -> current):\n"
        "  +thirdparty.gain width=3 owner=thirdparty\n"  # one line, however many offsets the slot shifts
        """To backtest it, pass --set 'plugins.disable=["thirdparty"]' to load only the plugins it was trained with """
        "(its metadata.json lists the plugins it was trained with).\n"
    )
    assert kit.invoke("backtest", checkpoint, "--set", 'plugins.disable=["thirdparty"]').exit_code == 0
    # a plugin the user's own --set leaves out is named with the one disable list that loads the trained set
    both = kit.invoke("backtest", checkpoint, "--set", 'plugins.disable=["gamma"]')
    assert f"- gamma {__version__} (missing now)" in both.stderr
    assert """pass --set 'plugins.disable=["thirdparty"]' to load only the plugins it was trained with""" in both.stderr
    other = kit.invoke("backtest", checkpoint, "--set", "learner.lr=0.1")
    assert other.exit_code == 2
    assert "foxhunt backtest takes only [plugins] from --config and --set" in other.stderr
    assert other.stderr.rstrip().endswith("remove learner")


def test_backtest_refuses_a_resume_checkpoint_or_a_non_checkpoint(run_dir: Path, tmp_path: Path) -> None:
    result = kit.invoke("backtest", str(tampered_checkpoint(run_dir, tmp_path, lambda m: m.update(kind="resume"))))
    assert result.exit_code == 2 and "fold checkpoint" in result.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = kit.invoke("backtest", str(empty))
    assert result.exit_code == 2 and "no checkpoint metadata" in result.stderr


# -- foxhunt datasets list ----------------------------------------------------------------------


def test_datasets_list_names_the_bundled_datasets_and_the_generators() -> None:
    result = kit.invoke("datasets", "list")
    assert result.exit_code == 0, result.output
    for name in ("eurusd-1h-2017", "sp500-1d-1999-2018", "synthetic:planted", "synthetic:regime"):
        assert name in result.stdout


# -- errors: one clear paragraph, exit code 2 ---------------------------------------------------


def bad_csv(tmp_path: Path) -> Path:
    path = tmp_path / "bars.csv"
    path.write_text(
        "time,open,high,low,close,volume\n"
        "2020-01-01,1.0,2.0,0.5,1.5,10\n"
        "2020-01-02,1.0,2.0,0.5,abc,10\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (lambda tmp: ["--data", str(tmp / "missing.csv")], ["missing.csv", "no such file"]),
        (lambda tmp: ["--data", str(bad_csv(tmp))], ["bars.csv", "row 2 (line 3)", "column 'close'", "'abc' is not a number"]),
        (lambda tmp: ["--data", "eurusd-2h-1066"], ["eurusd-2h-1066", "not a dataset name", "eurusd-1h-2017"]),
        (lambda tmp: ["--data", "synthetic:planted?bars=800&colour=red"], ["colour", "not valid for synthetic:planted"]),
        (lambda tmp: ["--set", "train.epoch=3"], ["train.epoch", "unknown key"]),
        (lambda tmp: ["--set", "train.epochs=many"], ["train.epochs", "expected an integer"]),
        (lambda tmp: ["--set", "train.epochs=0"], ["train.epochs"]),
        (lambda tmp: ["--set", "no_such_section.key=1"], ["no_such_section"]),
    ],
    ids=["missing-file", "bad-csv-row", "unknown-dataset", "bad-synthetic-key", "unknown-key", "wrong-type", "out-of-range",
         "unknown-section"],
)
def test_bad_input_is_one_clear_paragraph(tmp_path: Path, args, expected: list[str]) -> None:
    result = kit.invoke("train", *args(tmp_path), "--out", str(tmp_path / "run"), "--device", "cpu", "--no-progress")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")
    for fragment in expected:
        assert fragment in result.stderr
    assert "Traceback" not in result.output
    assert len([line for line in result.stderr.splitlines() if line.strip()]) <= 3
    assert not (tmp_path / "run").exists()  # a run that never started leaves no empty folder behind


def test_a_failed_start_keeps_a_folder_the_user_already_had(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    result = kit.invoke("train", "--data", str(tmp_path / "missing.csv"), "--out", str(mine), "--device", "cpu", "--no-progress")
    assert result.exit_code == 2
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_unwritable_out_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    result = kit.invoke("train", "--out", str(blocker / "run"), "--no-progress")
    assert result.exit_code == 2, result.output
    assert "cannot create the run directory" in result.stderr and str(blocker / "run") in result.stderr
    assert "--out" in result.stderr and "Traceback" not in result.output


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_out_into_a_folder_of_user_files_is_refused_and_nothing_is_overwritten(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "equity").mkdir(parents=True)
    (mine / "config.toml").write_text("# my own settings, with comments\n[learner]\nlr = 1.0\n", encoding="utf-8")
    (mine / "equity" / "fold_0.csv").write_text("my,data\n", encoding="utf-8")
    before = snapshot(mine)
    result = kit.invoke(*kit.train_args(mine))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "is not a foxhunt folder" in result.stderr and "nothing there was changed" in result.stderr
    assert snapshot(mine) == before and sorted(p.name for p in mine.iterdir()) == ["config.toml", "equity"]


def test_backtest_out_never_writes_into_a_training_run(run_dir: Path) -> None:
    before = snapshot(run_dir)
    result = kit.invoke("backtest", str(run_dir / "checkpoints" / "fold_0"), "--out", str(run_dir))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "holds a foxhunt training run, not `foxhunt backtest` output" in result.stderr
    assert snapshot(run_dir) == before


def test_out_holding_a_finished_run_is_refused(run_dir: Path) -> None:
    before = snapshot(run_dir)
    result = kit.invoke(*kit.train_args(run_dir))
    assert result.exit_code == 2
    assert "the run finished" in result.stderr and "never resumed or rewritten" in result.stderr
    assert snapshot(run_dir) == before


def test_resume_of_a_finished_run_is_refused_before_anything_is_built(run_dir: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Trainer was built for a run that cannot be resumed")

    monkeypatch.setattr("foxhunt.cli.train_commands.Trainer", no_build)
    result = kit.invoke("train", "--resume", str(copy), "--no-progress")
    assert result.exit_code == 2
    assert "the run finished" in result.stderr and "never resumed" in result.stderr
    assert "Traceback" not in result.output


def test_resume_with_new_settings_is_refused(run_dir: Path) -> None:
    result = kit.invoke("train", "--resume", str(run_dir), "--set", "train.epochs=9")
    assert result.exit_code == 2
    assert "--resume" in result.stderr and "drop --config, --set, --data and --bands" in result.stderr
