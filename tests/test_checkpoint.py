"""Checkpoints: safetensors + metadata.json, and the fingerprint check that refuses another layout (invariant 4)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
import torch

from foxhunt import ISV, IsvLayout, Slot
from foxhunt.checkpoint import (
    METADATA_FILE, TENSORS_FILE, load_checkpoint, metadata_digest, read_metadata, save_checkpoint, seal_metadata, verify_layout,
)
from foxhunt.errors import CheckpointError, FingerprintMismatch
from foxhunt.isv import FINGERPRINT_SLOT

LAYOUT = IsvLayout.compose([Slot("tau.value", 1, "tau", init=0.005), Slot("gamma.branch", 4, "gamma", init=0.99)])


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    isv = ISV(LAYOUT)
    isv.write("tau.value", 0.01)
    tensors = {"isv": isv.tensor, "net.weight": torch.arange(12, dtype=torch.float64).reshape(3, 4)}
    metadata = {"seed": 7, "plugins": {"tau": {"distribution": "foxhunt", "version": "0.1.0"}}}
    return save_checkpoint(tmp_path / "ckpt", tensors, metadata, LAYOUT)


def _edit_metadata(path: Path, edit) -> None:
    meta_path = path / METADATA_FILE
    meta = json.loads(meta_path.read_text())
    edit(meta)
    meta_path.write_text(json.dumps(meta))


def test_round_trip_is_bit_exact_and_keeps_the_metadata(checkpoint: Path) -> None:
    tensors, metadata = load_checkpoint(checkpoint, LAYOUT)
    isv = ISV(LAYOUT)
    isv.write("tau.value", 0.01)
    assert torch.equal(tensors["isv"].view(torch.int32), isv.tensor.view(torch.int32))
    assert tensors["net.weight"].dtype == torch.float64
    assert tensors["net.weight"].tolist() == torch.arange(12, dtype=torch.float64).reshape(3, 4).tolist()
    assert metadata["seed"] == 7
    assert metadata["plugins"] == {"tau": {"distribution": "foxhunt", "version": "0.1.0"}}
    assert metadata["isv"]["fingerprint"] == LAYOUT.fingerprint_hex
    assert metadata["isv"]["slots"] == LAYOUT.to_records()
    assert sorted(p.name for p in checkpoint.iterdir()) == [METADATA_FILE, TENSORS_FILE]  # no temp files left


def test_metadata_can_be_read_from_the_directory_or_the_file(checkpoint: Path) -> None:
    assert read_metadata(checkpoint) == read_metadata(checkpoint / METADATA_FILE)


def test_tampered_slots_are_refused_with_the_slot_diff(checkpoint: Path) -> None:
    def widen(meta) -> None:
        for record in meta["isv"]["slots"]:
            if record["name"] == "gamma.branch":
                record["width"] = 3

    _edit_metadata(checkpoint, widen)
    with pytest.raises(FingerprintMismatch) as caught:
        load_checkpoint(checkpoint, LAYOUT)
    message = str(caught.value)
    assert message.startswith(f"{checkpoint}: ISV layout fingerprint {LAYOUT.fingerprint_hex} does not match")
    assert "There is no migration" in message
    assert "Slot diff (checkpoint -> current):\n" in message
    assert "-gamma.branch width=3 owner=gamma" in message
    assert "+gamma.branch width=4 owner=gamma" in message


def test_tampered_fingerprint_is_refused(checkpoint: Path) -> None:
    forged = LAYOUT.fingerprint ^ 1

    def forge(meta) -> None:
        meta["isv"]["fingerprint"] = f"{forged:016x}"

    _edit_metadata(checkpoint, forge)
    with pytest.raises(FingerprintMismatch) as caught:
        load_checkpoint(checkpoint, LAYOUT)
    assert (caught.value.found, caught.value.expected) == (forged, LAYOUT.fingerprint)
    assert f"ISV layout fingerprint {forged:016x} does not match the current layout {LAYOUT.fingerprint_hex}" in str(caught.value)
    assert caught.value.diff_text == "(slots identical)"


def test_checkpoint_of_another_plugin_set_is_refused(checkpoint: Path) -> None:
    current = IsvLayout.compose([*LAYOUT.slots[:-1], Slot("health.value", 1, "health")])
    with pytest.raises(FingerprintMismatch) as caught:
        load_checkpoint(checkpoint, current)
    assert caught.value.diff_text == "+health.value width=1 owner=health"  # not tau.value and the fingerprint it shifts
    verify_layout(read_metadata(checkpoint), LAYOUT, "same layout")  # no error


def test_missing_and_damaged_checkpoints(tmp_path: Path, checkpoint: Path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint metadata here; pass a checkpoint directory"):
        load_checkpoint(tmp_path / "nothing", LAYOUT)
    (checkpoint / METADATA_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="metadata is not valid JSON .*; the checkpoint is damaged"):
        load_checkpoint(checkpoint, LAYOUT)
    (checkpoint / METADATA_FILE).write_text(json.dumps({"seed": 1}))
    with pytest.raises(CheckpointError, match="checkpoint metadata has no valid 'isv' layout"):
        load_checkpoint(checkpoint, LAYOUT)


def test_missing_tensor_file_is_reported_after_the_layout_check(checkpoint: Path) -> None:
    (checkpoint / TENSORS_FILE).unlink()
    with pytest.raises(CheckpointError, match="tensor file missing; the checkpoint is incomplete"):
        load_checkpoint(checkpoint, LAYOUT)


def test_the_integrity_record_hashes_the_tensor_bytes_and_the_rest_of_the_metadata(checkpoint: Path) -> None:
    metadata = read_metadata(checkpoint)
    integrity = metadata["integrity"]
    assert integrity["tensors_sha256"] == hashlib.sha256((checkpoint / TENSORS_FILE).read_bytes()).hexdigest()
    assert integrity["metadata_sha256"] == metadata_digest(metadata)
    assert metadata_digest(metadata) == metadata_digest({**metadata, "integrity": {**integrity, "metadata_sha256": "x"}})
    assert metadata_digest(metadata) != metadata_digest({**metadata, "seed": 8})


def test_changed_tensor_bytes_are_refused_before_they_are_parsed(checkpoint: Path) -> None:
    data = bytearray((checkpoint / TENSORS_FILE).read_bytes())
    data[-1] ^= 1
    (checkpoint / TENSORS_FILE).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="tensor file does not match the SHA-256 in its metadata; the checkpoint is damaged or altered"):
        load_checkpoint(checkpoint, LAYOUT)


def test_changed_metadata_is_refused_and_resealed_metadata_is_accepted(checkpoint: Path) -> None:
    _edit_metadata(checkpoint, lambda meta: meta.update(seed=8))
    with pytest.raises(CheckpointError, match="metadata does not match its SHA-256; the checkpoint is damaged or altered"):
        load_checkpoint(checkpoint, LAYOUT)
    _edit_metadata(checkpoint, lambda meta: seal_metadata(meta, meta["integrity"]["tensors_sha256"]))
    assert load_checkpoint(checkpoint, LAYOUT)[1]["seed"] == 8


def test_non_finite_values_are_refused_naming_the_tensor(tmp_path: Path) -> None:
    weight = torch.ones(3, 4, dtype=torch.float64)
    weight[1, 2] = math.inf
    path = save_checkpoint(tmp_path / "ckpt", {"isv": ISV(LAYOUT).tensor, "net.weight": weight}, {}, LAYOUT)
    with pytest.raises(CheckpointError, match="tensor 'net.weight' holds NaN or infinite values"):
        load_checkpoint(path, LAYOUT)


def test_the_isv_fingerprint_lanes_may_be_nan_bit_patterns_but_a_nan_slot_is_refused(tmp_path: Path) -> None:
    """The fingerprint's 64 bits are stored as two float32 lanes; a lane that reads as NaN is not a value."""
    isv = ISV(LAYOUT)
    lanes = isv.tensor[LAYOUT.span(FINGERPRINT_SLOT)]
    assert lanes.numel() == 2
    nan_lanes = torch.tensor([0x7FC00001, 0x7F800000], dtype=torch.int32).view(torch.float32)
    isv.tensor[LAYOUT.span(FINGERPRINT_SLOT)] = nan_lanes
    tensors, _ = load_checkpoint(save_checkpoint(tmp_path / "lanes", {"isv": isv.tensor}, {}, LAYOUT), LAYOUT)
    assert tensors["isv"].view(torch.int32).tolist() == isv.tensor.view(torch.int32).tolist()
    isv.write("tau.value", math.nan)
    with pytest.raises(CheckpointError, match="tensor 'isv' holds NaN or infinite values"):
        load_checkpoint(save_checkpoint(tmp_path / "slot", {"isv": isv.tensor}, {}, LAYOUT), LAYOUT)


def test_metadata_nested_beyond_any_checkpoint_is_refused(checkpoint: Path) -> None:
    (checkpoint / METADATA_FILE).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match="nested too deeply"):
        load_checkpoint(checkpoint, LAYOUT)
