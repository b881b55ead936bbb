"""Checkpoints: tensors in safetensors (no pickle anywhere) beside a JSON metadata file.

The metadata carries the ISV layout and fingerprint, plugin versions, config,
seed and data hash. Loading checks the fingerprint *first* and refuses a
different layout with a slot diff (invariant 4: there is no migration path).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from foxhunt.errors import CheckpointError, FingerprintMismatch
from foxhunt.isv import IsvLayout, layout_diff

__all__ = [
    "TENSORS_FILE",
    "METADATA_FILE",
    "save_checkpoint",
    "read_metadata",
    "load_checkpoint",
    "checkpoint_layout",
    "verify_layout",
]

TENSORS_FILE = "tensors.safetensors"
METADATA_FILE = "metadata.json"


def _atomic_write(path: Path, write) -> None:
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(handle)
    try:
        write(temp)
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def save_checkpoint(directory: Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, Any], layout: IsvLayout) -> Path:
    """Write ``tensors`` and ``metadata`` (plus the layout) into ``directory`` atomically, file by file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    host = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    _atomic_write(directory / TENSORS_FILE, lambda temp: save_file(host, temp))
    meta = dict(metadata)
    meta["isv"] = {"fingerprint": layout.fingerprint_hex, "slots": layout.to_records()}
    text = json.dumps(meta, indent=2, sort_keys=True)
    _atomic_write(directory / METADATA_FILE, lambda temp: Path(temp).write_text(text, encoding="utf-8"))
    return directory


def _metadata_path(path: Path) -> Path:
    path = Path(path)
    return path / METADATA_FILE if path.is_dir() else path


def read_metadata(path: Path) -> dict[str, Any]:
    """A checkpoint's metadata (``path`` is the checkpoint directory or its metadata.json)."""
    meta_path = _metadata_path(path)
    try:
        return json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{meta_path}: no checkpoint metadata here; pass a checkpoint directory") from None
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{meta_path}: metadata is not valid JSON ({error}); the checkpoint is damaged") from None


def checkpoint_layout(metadata: Mapping[str, Any], source: str) -> tuple[IsvLayout, int]:
    """The layout rebuilt from a checkpoint's slot list, and the fingerprint it *claims*."""
    try:
        isv = metadata["isv"]
        return IsvLayout.from_records(isv["slots"]), int(isv["fingerprint"], 16)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{source}: checkpoint metadata has no valid 'isv' layout ({error})") from None


def verify_layout(metadata: Mapping[str, Any], current: IsvLayout, source: str) -> None:
    """Raise :class:`FingerprintMismatch` (with a slot diff) unless the checkpoint matches ``current``."""
    saved, claimed = checkpoint_layout(metadata, source)
    if claimed != current.fingerprint or saved.fingerprint != current.fingerprint:
        raise FingerprintMismatch(source, current.fingerprint, claimed, layout_diff(saved, current))


def load_checkpoint(path: Path, current: IsvLayout) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Verify the layout, then load the tensors (onto the CPU)."""
    directory = Path(path)
    metadata = read_metadata(directory)
    verify_layout(metadata, current, str(directory))
    tensor_path = directory / TENSORS_FILE
    if not tensor_path.exists():
        raise CheckpointError(f"{tensor_path}: tensor file missing; the checkpoint is incomplete")
    return load_file(str(tensor_path)), metadata
