"""``foxhunt export``: writes a model and its metadata, says where; bad input is one paragraph with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from export_testkit import checkpoint  # noqa: F401 - a fixture

from foxhunt.actions import Branch

import trainer_testkit as kit


def test_export_writes_the_model_and_its_metadata_where_asked(checkpoint: Path, tmp_path: Path) -> None:  # noqa: F811
    output = tmp_path / "policy.pt"
    result = kit.invoke("export", str(checkpoint), "--format", "torchscript", "--output", str(output))
    assert result.exit_code == 0, result.output + result.stderr
    assert f"wrote {output} (torchscript, inputs: observation) and its metadata {output}.json" in result.output
    metadata = json.loads(Path(f"{output}.json").read_text(encoding="utf-8"))
    actions, q_values = torch.jit.load(str(output))(torch.zeros(2, metadata["observation"]["width"]))
    assert actions.shape == (2, Branch.size()) and q_values.shape == (2, Branch.size(), 4)


def test_without_output_the_model_is_named_after_the_checkpoint_in_the_current_folder(
        checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.chdir(tmp_path)
    result = kit.invoke("export", str(checkpoint), "--format", "torchscript", "--inputs", "raw")
    assert result.exit_code == 0, result.output + result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fold_0.pt", "fold_0.pt.json"]
    assert json.loads((tmp_path / "fold_0.pt.json").read_text(encoding="utf-8"))["input_layout"] == "raw"


def test_a_missing_checkpoint_is_one_paragraph_and_an_unknown_format_a_usage_error(tmp_path: Path) -> None:
    result = kit.invoke("export", str(tmp_path / "nothing"), "--format", "onnx")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "no checkpoint metadata here; pass a checkpoint directory" in result.stderr
    result = kit.invoke("export", str(tmp_path), "--format", "tflite")
    assert result.exit_code == 2 and "'tflite' is not one of 'torchscript', 'onnx'" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_help_shows_an_example_and_the_input_layouts() -> None:
    result = kit.invoke("export", "--help")
    assert result.exit_code == 0
    assert "foxhunt export runs/" in result.output and "--format onnx" in result.output
    assert "observation" in result.output and "raw" in result.output
