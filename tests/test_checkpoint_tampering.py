"""Damaged or altered checkpoints are refused as one paragraph (CheckpointError; exit code 2, no traceback).

One tiny run is stopped inside its last fold, so it leaves both kinds of
checkpoint: ``checkpoints/fold_0`` (a policy, read by ``foxhunt backtest``) and
``checkpoints/resume`` (read by ``foxhunt train --resume``). Every case copies
the run, damages one checkpoint in one way and checks the reader's answer.

Two kinds of damage: *raw* (bytes or metadata changed, hashes left as they were:
the integrity check must refuse it) and *sealed* (the change is written with
fresh hashes, as a foxhunt writing such a checkpoint would: the typed readers
behind the integrity check must refuse it, naming the key or tensor).
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file
from trainer_testkit import TINY, TINY_DATA, StopAfter, _private_feature_cache, invoke  # noqa: F401 - a fixture

from foxhunt.checkpoint_backtest import backtest_checkpoint
from foxhunt.checkpoint import METADATA_FILE, TENSORS_FILE, seal_metadata
from foxhunt.config import load_config
from foxhunt.errors import CheckpointError
from foxhunt.trainer import resume
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

POLICY, RESUME = "checkpoints/fold_0", f"checkpoints/{resume.RESUME_NAME}"
DAMAGED = "damaged or altered"


def tiny_config():
    return load_config(None, [*TINY, f'data.source="{TINY_DATA}"', 'run.device="cpu"'])


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> Path:
    """A tiny run stopped after three epochs (inside fold 1): a fold_0 policy checkpoint and a resume checkpoint."""
    path = tmp_path_factory.mktemp("tampering") / "run"
    assert Trainer(tiny_config(), RunDirectory(path), stop=StopAfter(path, 3), show_progress=False).run() is None
    assert (path / POLICY).is_dir() and (path / RESUME).is_dir()
    return path


def copy_run(run: Path, into: Path) -> Path:
    copy = into / "run"
    shutil.copytree(run, copy)
    return copy


# -- ways to damage a checkpoint directory ----------------------------------------------------------------


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def edit_metadata(directory: Path, edit: Callable[[dict[str, Any]], None], seal: bool) -> None:
    path = directory / METADATA_FILE
    metadata = json.loads(path.read_text(encoding="utf-8"))
    edit(metadata)
    if seal:
        seal_metadata(metadata, sha256_of(directory / TENSORS_FILE))
    path.write_text(json.dumps(metadata), encoding="utf-8")


def edit_tensors(directory: Path, edit: Callable[[dict[str, torch.Tensor]], None]) -> None:
    """Rewrite the tensor file through ``edit`` and seal the metadata with the new file's hash."""
    tensors = load_file(str(directory / TENSORS_FILE))
    edit(tensors)
    save_file(tensors, str(directory / TENSORS_FILE))
    edit_metadata(directory, lambda metadata: None, seal=True)


def first_weight(tensors: dict[str, torch.Tensor]) -> str:
    return next(name for name in sorted(tensors)
                if name.startswith("learner.network.") and tensors[name].dim() == 2 and tensors[name].is_floating_point())


def flip_byte(offset: int) -> Callable[[Path], None]:
    def damage(directory: Path) -> None:
        data = bytearray((directory / TENSORS_FILE).read_bytes())
        data[offset] ^= 0xFF
        (directory / TENSORS_FILE).write_bytes(bytes(data))
    return damage


def replace_tensor_file(content: Callable[[Path], None]) -> Callable[[Path], None]:
    def damage(directory: Path) -> None:
        (directory / TENSORS_FILE).unlink()
        content(directory / TENSORS_FILE)
    return damage


def truncate(directory: Path) -> None:
    data = (directory / TENSORS_FILE).read_bytes()
    (directory / TENSORS_FILE).write_bytes(data[: len(data) // 2])


def nan_weight(tensors: dict[str, torch.Tensor]) -> None:
    tensors[first_weight(tensors)][0, 0] = math.nan


def reshaped_weight(tensors: dict[str, torch.Tensor]) -> None:
    name = first_weight(tensors)
    tensors[name] = tensors[name][:, :-1].contiguous()


def widened_weight(tensors: dict[str, torch.Tensor]) -> None:
    name = first_weight(tensors)
    tensors[name] = tensors[name].double()


def sealed(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda directory: edit_metadata(directory, edit, seal=True)


def raw(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda directory: edit_metadata(directory, edit, seal=False)


def tensors_edit(edit: Callable[[dict[str, torch.Tensor]], None]) -> Callable[[Path], None]:
    return lambda directory: edit_tensors(directory, edit)


def set_key(*path_and_value: Any) -> Callable[[dict[str, Any]], None]:
    *path, value = path_and_value

    def edit(metadata: dict[str, Any]) -> None:
        target = metadata
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def drop_key(*path: str) -> Callable[[dict[str, Any]], None]:
    def edit(metadata: dict[str, Any]) -> None:
        target = metadata
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return edit


def set_normalizer_mean(values: torch.Tensor) -> Callable[[dict[str, torch.Tensor]], None]:
    return lambda tensors: tensors.__setitem__("normalizer.mean", values)


def make_directory(path: Path) -> None:
    path.mkdir()


# (case id, damage, which checkpoints it applies to, what the message must say)
BOTH = (POLICY, RESUME)
CASES: list[tuple[str, Callable[[Path], None], tuple[str, ...], str]] = [
    ("header-byte-flipped", flip_byte(12), BOTH, DAMAGED),
    ("tensor-bytes-flipped", flip_byte(-3), BOTH, DAMAGED),
    ("truncated", truncate, BOTH, DAMAGED),
    ("empty-file", replace_tensor_file(lambda p: p.write_bytes(b"")), BOTH, DAMAGED),
    ("pickle-in-place", replace_tensor_file(lambda p: p.write_bytes(pickle.dumps({"w": [1.0, 2.0]}))), BOTH, DAMAGED),
    ("torch-save-in-place", replace_tensor_file(lambda p: torch.save({"w": torch.ones(3)}, p)), BOTH, DAMAGED),
    ("tensors-path-is-a-directory", replace_tensor_file(make_directory), BOTH, "not a regular file"),
    ("tensors-missing", lambda d: (d / TENSORS_FILE).unlink(), BOTH, "missing"),
    ("metadata-edited-unsealed", raw(set_key("seed", 99)), BOTH, "metadata does not match its SHA-256"),
    ("integrity-record-removed", raw(drop_key("integrity")), BOTH, "no integrity record"),
    ("metadata-not-json", lambda d: (d / METADATA_FILE).write_text("{not json", encoding="utf-8"), BOTH, "not valid JSON"),
    ("metadata-a-list", lambda d: (d / METADATA_FILE).write_text("[1, 2]", encoding="utf-8"), BOTH, "not an object"),
    ("nan-weight", tensors_edit(nan_weight), BOTH, "NaN or infinite"),
    ("weight-wrong-shape", tensors_edit(reshaped_weight), BOTH, "expected torch.float32"),
    ("weight-wrong-dtype", tensors_edit(widened_weight), BOTH, "is torch.float64"),
    ("isv-wrong-shape", tensors_edit(lambda t: t.__setitem__("isv", t["isv"][:-1].contiguous())), BOTH, "tensor 'isv'"),
    ("missing-feature_set", sealed(drop_key("feature_set")), (POLICY,), "'feature_set' is missing"),
    ("missing-validation_window", sealed(drop_key("validation_window")), (POLICY,), "'validation_window' is missing"),
    ("plugins-a-list", sealed(set_key("plugins", ["tau"])), (POLICY,), "'plugins' is a list, expected dict"),
    ("normalizer_clip-a-string", sealed(set_key("normalizer_clip", "10")), (POLICY,), "'normalizer_clip' is a str"),
    ("window-past-the-data", sealed(set_key("test_window", [700, 5000])), (POLICY,), "ends past the data's 800 bars"),
    ("missing-normalizer.mean", tensors_edit(lambda t: t.pop("normalizer.mean")), (POLICY,), "'normalizer.mean' is missing"),
    ("normalizer.mean-40-wide", tensors_edit(set_normalizer_mean(torch.zeros(40, dtype=torch.float64))), (POLICY,),
     "tensor 'normalizer.mean' is torch.float64 (40,)"),
    ("normalizer.mean-float32", tensors_edit(set_normalizer_mean(torch.zeros(20))), (POLICY,), "torch.float32 (20,)"),
    ("missing-position", sealed(drop_key("position")), (RESUME,), "'position' is missing"),
    ("position-fold-a-string", sealed(set_key("position", "fold", "1")), (RESUME,), "'position.fold' is a str"),
    ("position-past-the-last-fold", sealed(set_key("position", "fold", 7)), (RESUME,), "past the run's last fold"),
    # a run with train.flat_fold_retries = 0 cannot have started a retry
    ("position-retries-past-the-config", sealed(set_key("position", "retries", 1)), (RESUME,),
     "'position.retries' is 1, more than train.flat_fold_retries (0)"),
    ("position-retries-a-string", sealed(set_key("position", "retries", "0")), (RESUME,), "'position.retries' is a str"),
    ("missing-metric_lines", sealed(drop_key("metric_lines")), (RESUME,), "'metric_lines' is missing"),
    ("env-state-wrong-shape", tensors_edit(lambda t: t.__setitem__("env.state", t["env.state"][:1].contiguous())),
     (RESUME,), "tensor 'env.state'"),
]
TABLE = [pytest.param(damage, which, says, id=f"{case}-{'policy' if which == POLICY else 'resume'}")
         for case, damage, targets, says in CASES for which in targets]


@pytest.mark.parametrize(("damage", "which", "says"), TABLE)
def test_damage_is_refused_as_one_paragraph(stopped_run: Path, tmp_path: Path, damage, which: str, says: str) -> None:
    run = copy_run(stopped_run, tmp_path)
    checkpoint = run / which
    damage(checkpoint)
    if which == POLICY:
        with pytest.raises(CheckpointError) as caught:
            backtest_checkpoint(checkpoint)
        assert str(checkpoint) in str(caught.value)
        assert says in str(caught.value)
        result = invoke("backtest", str(checkpoint), "--out", str(tmp_path / "backtest"))
    else:
        result = invoke("train", "--resume", str(run), "--no-progress")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    error = result.stderr[result.stderr.index("error: "):]
    assert str(checkpoint) in error and says in error


def test_an_intact_copy_still_loads(stopped_run: Path, resumable_trainer: Trainer, tmp_path: Path) -> None:
    """The control: the same copying and sealing, with no change, is accepted by both readers."""
    run = copy_run(stopped_run, tmp_path)
    edit_tensors(run / POLICY, lambda tensors: None)
    edit_tensors(run / RESUME, lambda tensors: None)
    assert backtest_checkpoint(run / POLICY).window_name == "test"
    position = resume.restore(resumable_trainer, run)
    assert (position.fold, position.epoch, len(position.results)) == (1, 1, 1)


# -- hypothesis: any mutation of the metadata, sealed, gives CheckpointError or a working load ---------------

WRONG_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8), st.lists(st.integers(-3, 900), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


Path_ = tuple[Any, ...]
NOT_DESCENDED = {"config", "curves", "equity", "slots"}  # long or deep: their own parents are mutated whole


def test_a_checkpoint_saved_before_plugins_owned_their_settings_still_backtests(stopped_run: Path, tmp_path: Path) -> None:
    run = copy_run(stopped_run, tmp_path)

    def as_before_the_move(metadata: dict[str, Any]) -> None:
        config = metadata["config"]
        smoothing = config["plugins"].pop("c51")["label_smoothing_max"]
        config["learner"].update(kappa=1.0, label_smoothing_max=smoothing, cql_alpha=0.1, ensemble_diversity=0.5)
        config["adaptive"] = {"static": {"cql_alpha": 0.1}, "tau": {"start": 0.01, "end": 0.001}}

    edit_metadata(run / POLICY, as_before_the_move, seal=True)
    assert "adaptive" in json.loads((run / POLICY / METADATA_FILE).read_text(encoding="utf-8"))["config"]
    outcome = backtest_checkpoint(run / POLICY)
    assert outcome.window_name == "test"


def key_paths(value: Any, prefix: Path_ = (), depth: int = 0) -> list[Path_]:
    """Key paths into the metadata, three levels deep (list items by index); the seal rewrites ``integrity``."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    paths: list[Path_] = []
    for key, inner in items:
        if depth == 0 and key == "integrity":
            continue
        paths.append((*prefix, key))
        if depth < 3 and key not in NOT_DESCENDED and isinstance(inner, (dict, list)):
            paths += key_paths(inner, (*prefix, key), depth + 1)
    return sorted(paths, key=repr)


def mutations(paths: list[Path_]) -> st.SearchStrategy:
    return st.lists(st.tuples(st.sampled_from(paths), st.one_of(st.just(DELETE), WRONG_VALUES)), min_size=1, max_size=3)


DELETE = ("delete",)  # a tuple: JSON values are never tuples, so it cannot collide with a generated value


def apply(metadata: dict[str, Any], changes: list[tuple[Path_, Any]]) -> None:
    for path, value in changes:
        target: Any = metadata
        for key in path[:-1]:
            fits = isinstance(target, dict) and key in target or isinstance(target, list) and isinstance(key, int) and key < len(target)
            target = target[key] if fits else None
        last = path[-1]
        if isinstance(target, dict) or isinstance(target, list) and isinstance(last, int) and last < len(target):
            if value is not DELETE:
                target[last] = value
            elif isinstance(target, list) or last in target:
                del target[last]
        # otherwise an earlier change removed or replaced the parent: nothing left to change


@pytest.fixture(scope="module")
def resumable_trainer(stopped_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Trainer:
    """A trainer built once for the run's config: restore() is the reader under test, building it is not."""
    trainer = Trainer(tiny_config(), RunDirectory(copy_run(stopped_run, tmp_path_factory.mktemp("live")), resume=True),
                      show_progress=False)
    trainer._build()
    return trainer


def _mutated_copy(stopped_run: Path, into: Path, which: str, changes) -> Path:
    run = copy_run(stopped_run, into)
    edit_metadata(run / which, lambda metadata: apply(metadata, changes), seal=True)
    return run


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_sealed_metadata_mutations_give_checkpoint_error_or_a_working_backtest(stopped_run: Path, data) -> None:
    metadata = json.loads((stopped_run / POLICY / METADATA_FILE).read_text(encoding="utf-8"))
    changes = data.draw(mutations(key_paths(metadata)))
    with tempfile.TemporaryDirectory() as scratch:
        run = _mutated_copy(stopped_run, Path(scratch), POLICY, changes)
        try:
            outcome = backtest_checkpoint(run / POLICY)
        except CheckpointError as error:
            assert str(run / POLICY) in str(error)
        else:
            assert outcome.metrics["agent"]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_sealed_metadata_mutations_give_checkpoint_error_or_a_working_resume(
    stopped_run: Path, resumable_trainer: Trainer, data
) -> None:
    metadata = json.loads((stopped_run / RESUME / METADATA_FILE).read_text(encoding="utf-8"))
    changes = data.draw(mutations(key_paths(metadata)))
    # restore() cuts the trainer's own metrics.jsonl to the lines the checkpoint counted: an earlier example
    # with a smaller metric_lines must not leave this one a cut file
    shutil.copyfile(stopped_run / "metrics.jsonl", resumable_trainer.run_dir.path / "metrics.jsonl")
    with tempfile.TemporaryDirectory() as scratch:
        run = _mutated_copy(stopped_run, Path(scratch), RESUME, changes)
        try:
            position = resume.restore(resumable_trainer, run)
        except CheckpointError as error:
            assert str(run / RESUME) in str(error)
        else:
            assert 0 <= position.fold < 2
            resumable_trainer._summary(position.results)  # the finished folds it accepted can be summarised


def test_the_cases_cover_every_reported_failure() -> None:
    """The table names each failure the reliability issue reported, so a removed row is noticed."""
    names = {case for case, *_ in CASES}
    assert {"header-byte-flipped", "truncated", "empty-file", "pickle-in-place", "torch-save-in-place",
            "missing-feature_set", "missing-validation_window", "missing-position", "missing-normalizer.mean",
            "plugins-a-list", "normalizer_clip-a-string", "normalizer.mean-40-wide", "tensors-path-is-a-directory",
            "position-past-the-last-fold", "tensor-bytes-flipped", "nan-weight"} <= names



def test_a_resume_whose_checkpoint_counts_more_metric_lines_than_the_file_holds_is_refused_by_name(
    stopped_run: Path, resumable_trainer: Trainer
) -> None:
    """The checkpoint and metrics.jsonl disagree (the file was cut, or the count forged): a CheckpointError that
    names the checkpoint, the file and both counts, never a resume whose report misses epochs."""
    metrics = resumable_trainer.run_dir.path / "metrics.jsonl"
    lines = (stopped_run / "metrics.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    metrics.write_text("".join(lines[:-1]), encoding="utf-8")
    try:
        with pytest.raises(CheckpointError) as refused:
            resume.restore(resumable_trainer, stopped_run)
        message = str(refused.value)
        assert str(stopped_run / RESUME) in message and str(metrics) in message
        assert f"holds {len(lines) - 1} whole lines, but the resume checkpoint counted {len(lines)}" in message
    finally:
        shutil.copyfile(stopped_run / "metrics.jsonl", metrics)  # the fixture's trainer is shared
