"""Checkpoints: tensors in safetensors (no pickle anywhere) beside a JSON metadata file.

The metadata carries the ISV layout and fingerprint, plugin versions, config,
seed and data hash. Loading checks the fingerprint *first* and refuses a
different layout with a slot diff (invariant 4: there is no migration path).

Integrity: ``metadata["integrity"]`` holds the SHA-256 of the tensor file's
bytes (``tensors_sha256``) and the SHA-256 of the metadata itself
(``metadata_sha256``: the canonical JSON — sorted keys, compact separators,
ASCII — of the metadata with that one field left out). Loading recomputes both
before any tensor is parsed and refuses a difference as "damaged or altered";
it then refuses NaN or infinite values in any floating tensor. The hashes carry
no key: they catch damage and edits, not a forger who recomputes them (see
docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from foxhunt import durable
from foxhunt.errors import CheckpointError, FingerprintMismatch, FoxhuntError
from foxhunt.isv import FINGERPRINT_SLOT, IsvLayout, layout_diff

__all__ = [
    "TENSORS_FILE",
    "METADATA_FILE",
    "INTEGRITY_KEY",
    "save_checkpoint",
    "read_metadata",
    "load_checkpoint",
    "checkpoint_layout",
    "verify_layout",
    "verify_metadata",
    "metadata_digest",
    "seal_metadata",
]

TENSORS_FILE = "tensors.safetensors"
METADATA_FILE = "metadata.json"
INTEGRITY_KEY = "integrity"
_DAMAGED = "the checkpoint is damaged or altered; use an intact copy or train again"


def metadata_digest(metadata: Mapping[str, Any]) -> str:
    """SHA-256 of ``metadata``'s canonical JSON, leaving out ``integrity.metadata_sha256`` (the digest's own home)."""
    content = dict(metadata)
    integrity = content.get(INTEGRITY_KEY)
    if isinstance(integrity, Mapping):
        content[INTEGRITY_KEY] = {k: v for k, v in integrity.items() if k != "metadata_sha256"}
    # NaN and Infinity are written as JSON's common extension (as json.dumps does when saving), so a metric
    # that overflowed still gives a checkpoint that can be saved, hashed and read back to the same digest
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def seal_metadata(metadata: dict[str, Any], tensors_sha256: str) -> dict[str, Any]:
    """``metadata`` with its integrity record filled in (tensor-file hash, then the metadata's own hash)."""
    metadata[INTEGRITY_KEY] = {"tensors_sha256": tensors_sha256}
    metadata[INTEGRITY_KEY]["metadata_sha256"] = metadata_digest(metadata)
    return metadata


def save_checkpoint(directory: Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, Any], layout: IsvLayout) -> Path:
    """Write ``tensors`` and ``metadata`` (plus the layout and the integrity record) as the folder ``directory``.

    Both files are written into a staging folder, flushed, and published
    together (:func:`foxhunt.durable.staged_directory`): a kill or a full disk
    at any point leaves the previous checkpoint whole, never new tensors beside
    old metadata.
    """
    directory = Path(directory)
    # Serialised once in memory: the bytes that are hashed are the bytes that are written, with no read-back.
    payload = save({name: t.detach().to("cpu").contiguous() for name, t in tensors.items()})
    meta = dict(metadata)
    meta["isv"] = {"fingerprint": layout.fingerprint_hex, "slots": layout.to_records()}
    text = json.dumps(seal_metadata(meta, hashlib.sha256(payload).hexdigest()), indent=2, sort_keys=True)
    try:
        with durable.staged_directory(directory) as staging:
            durable.write_new_file(staging / TENSORS_FILE, payload)
            durable.write_new_file(staging / METADATA_FILE, text.encode("utf-8"))
    except OSError as error:
        kept = "the previous checkpoint is kept as it was" if directory.exists() else "no checkpoint was written"
        raise FoxhuntError(
            f"{directory}: cannot write the checkpoint ({error.strerror or error}); {kept}. "
            "Free disk space or make the run folder writable, then continue with `foxhunt train --resume`"
        ) from None
    return directory


def _metadata_path(path: Path) -> Path:
    path = Path(path)
    return path / METADATA_FILE if path.is_dir() else path


def _regular_file(path: Path, what: str) -> None:
    """Refuse a missing path, a directory or a device in place of one of the checkpoint's files."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise CheckpointError(f"{path}: {what} missing; the checkpoint is incomplete") from None
    except OSError as error:
        raise CheckpointError(f"{path}: {what} cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        raise CheckpointError(f"{path}: {what} is not a regular file; {_DAMAGED}")


def read_metadata(path: Path) -> dict[str, Any]:
    """A checkpoint's metadata (``path`` is the checkpoint directory or its metadata.json), as parsed, unverified.

    :func:`load_checkpoint` verifies it; this reader serves inspection (``foxhunt layout diff``) and the
    checks that must come before loading (kind, plugin set, layout).
    """
    meta_path = _metadata_path(path)
    if not meta_path.exists():
        raise CheckpointError(f"{meta_path}: no checkpoint metadata here; pass a checkpoint directory")
    _regular_file(meta_path, "metadata")
    try:
        metadata = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{meta_path}: metadata is not valid JSON ({error}); {_DAMAGED}") from None
    except RecursionError:  # nesting deeper than any checkpoint writes
        raise CheckpointError(f"{meta_path}: metadata is nested too deeply to read; {_DAMAGED}") from None
    except OSError as error:
        raise CheckpointError(f"{meta_path}: metadata cannot be read ({error.strerror})") from None
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{meta_path}: metadata is a JSON {type(metadata).__name__}, not an object; {_DAMAGED}")
    return metadata


def checkpoint_layout(metadata: Mapping[str, Any], source: str) -> tuple[IsvLayout, int]:
    """The layout rebuilt from a checkpoint's slot list, and the fingerprint it *claims*."""
    try:
        isv = metadata["isv"]
        return IsvLayout.from_records(isv["slots"]), int(isv["fingerprint"], 16)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{source}: checkpoint metadata has no valid 'isv' layout ({error!r})") from None


def verify_layout(metadata: Mapping[str, Any], current: IsvLayout, source: str) -> None:
    """Raise :class:`FingerprintMismatch` (with a slot diff) unless the checkpoint matches ``current``."""
    saved, claimed = checkpoint_layout(metadata, source)
    if claimed != current.fingerprint or saved.fingerprint != current.fingerprint:
        raise FingerprintMismatch(source, current.fingerprint, claimed, layout_diff(saved, current))


def verify_metadata(metadata: Mapping[str, Any], source: Path) -> None:
    """Refuse metadata without an integrity record, or whose own SHA-256 differs (checks nothing of the tensors).

    :func:`load_checkpoint` does this and more; alone, it lets a caller trust the metadata of checkpoint
    ``source`` before loading its tensors (``--resume`` compares configs this way before building anything).
    """
    integrity = metadata.get(INTEGRITY_KEY)
    if not (isinstance(integrity, Mapping) and all(isinstance(integrity.get(k), str) for k in ("tensors_sha256", "metadata_sha256"))):
        raise CheckpointError(
            f"{Path(source) / METADATA_FILE}: no integrity record (SHA-256 of tensors and metadata); it was written before "
            "checkpoints carried one, or it was altered. Train again to get a checkpoint that can be checked"
        )
    if integrity["metadata_sha256"] != metadata_digest(metadata):
        raise CheckpointError(f"{Path(source) / METADATA_FILE}: metadata does not match its SHA-256; {_DAMAGED}")


def _verify_integrity(metadata: Mapping[str, Any], payload: bytes, tensor_path: Path, source: Path) -> None:
    """Both hashes recomputed and compared before a byte of the tensor file (``payload``) is parsed."""
    verify_metadata(metadata, source)
    if metadata[INTEGRITY_KEY]["tensors_sha256"] != hashlib.sha256(payload).hexdigest():
        raise CheckpointError(f"{tensor_path}: tensor file does not match the SHA-256 in its metadata; {_DAMAGED}")


def _values(name: str, tensor: torch.Tensor, layout: IsvLayout) -> torch.Tensor:
    """The part of a tensor that holds numbers: the ISV's fingerprint lanes are 64 bits stored as two float32
    bit patterns, which may read as NaN or inf and are checked by the fingerprint comparison instead."""
    if name != "isv":
        return tensor
    keep = torch.ones(tensor.shape[0], dtype=torch.bool)
    keep[layout.span(FINGERPRINT_SLOT)] = False
    return tensor[keep]


def _refuse_non_finite(tensors: Mapping[str, torch.Tensor], tensor_path: Path, layout: IsvLayout) -> None:
    for name, tensor in tensors.items():
        if (tensor.is_floating_point() or tensor.is_complex()) and not bool(torch.isfinite(_values(name, tensor, layout)).all()):
            raise CheckpointError(
                f"{tensor_path}: tensor {name!r} holds NaN or infinite values; a checkpoint of a diverged "
                "or damaged run is never used"
            )


def load_checkpoint(path: Path, current: IsvLayout) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Verify the layout, then both hashes, then load the tensors (onto the CPU) and refuse non-finite values."""
    directory = Path(path)
    metadata = read_metadata(directory)
    verify_layout(metadata, current, str(directory))
    tensor_path = directory / TENSORS_FILE
    _regular_file(tensor_path, "tensor file")
    try:
        payload = tensor_path.read_bytes()  # read once: the bytes that are hashed are the bytes that are parsed
    except OSError as error:
        raise CheckpointError(f"{tensor_path}: tensor file cannot be read ({error.strerror})") from None
    _verify_integrity(metadata, payload, tensor_path, directory)
    try:
        tensors = load(payload)
    except (SafetensorError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{tensor_path}: not a readable safetensors file ({error}); {_DAMAGED}") from None
    _refuse_non_finite(tensors, tensor_path, current)
    return tensors, metadata
