"""Replace a file so that a reader, a crash or a full disk sees either the old file or the new one, whole.

The new content goes to a temporary file in the same folder (a rename is atomic
only within one file system), is flushed to the disk with ``fsync``, and is
renamed over the target; then the folder is synced so that the rename itself
survives a power loss. When anything fails the temporary file is removed and
the old file is untouched.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path. ``OSError`` (a full disk, say) leaves the old file."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return path


def _sync_folder(folder: Path) -> None:
    # Platforms without O_DIRECTORY (Windows) cannot open a folder to sync it; the rename is still atomic there.
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:
        return
    descriptor = os.open(folder, os.O_RDONLY | flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
