"""Files and folders that survive a kill or a power loss: on disk whole, or not changed at all.

A file is written under a temporary name in its own folder, flushed to the disk
(``fsync``), renamed over its final name, and then the folder is flushed too, so
that the rename itself is on the disk. A rename within one filesystem is atomic:
a reader (or a process started after a crash) sees the old file or the new one,
never a part of either.

A checkpoint is a folder of two files that only make sense together, and POSIX
cannot rename a folder over a non-empty one. :func:`staged_directory` therefore
fills a hidden staging folder beside the target, flushes it, and publishes it
in two renames: the old folder moves aside to ``.NAME.old``, the staging folder
takes the name, and only then is the old one deleted. :func:`recover_directory`
finishes an interrupted publication: with the new folder in place the old one
is deleted; without it, the old one gets its name back. So at every instant one
complete folder can be found.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "fsync_directory", "write_all", "write_bytes", "write_text", "write_new_file", "staged_directory", "recover_directory",
]

_OLD = ".{}.old"
_STAGING = ".{}.new-"


def fsync_directory(path: Path) -> None:
    """Flush a folder's entries (creations, renames, removals) to the disk."""
    handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def write_all(handle: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a regular file may take fewer bytes per call on a full disk or
    after a signal)."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def _write_new(path: Path, data: bytes) -> None:
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(handle, data)
        os.fsync(handle)
    finally:
        os.close(handle)


def write_bytes(path: Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically and durably (temporary file, fsync, rename, fsync of the folder)."""
    path = Path(path)
    # created with O_EXCL under a random name (not mkstemp, whose files are private): the file gets the
    # permissions the user's umask gives any new file
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        _write_new(temp, data)
        os.replace(temp, path)
    finally:
        if temp.exists():
            temp.unlink()
    fsync_directory(path.parent)
    return path


def write_text(path: Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def recover_directory(target: Path) -> str | None:
    """Finish a publication of ``target`` that a kill interrupted; returns what was done, or None.

    Staging folders left by a kill are deleted as well: they never held the
    only copy of anything, since a staging folder is renamed only when complete.
    """
    target = Path(target)
    parent = target.parent
    if not parent.is_dir():
        return None
    done = None
    old = parent / _OLD.format(target.name)
    if old.is_dir():
        if target.exists():
            shutil.rmtree(old)
            done = f"removed {old.name}, left by a write that was interrupted after it completed"
        else:
            os.rename(old, target)
            done = f"restored {target.name} from {old.name}: a newer copy was being written when the process stopped"
    for staging in parent.glob(_STAGING.format(target.name) + "*"):
        shutil.rmtree(staging, ignore_errors=True)
        done = done or f"removed the unfinished copy {staging.name}"
    if done is not None:
        fsync_directory(parent)
    return done


@contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield an empty staging folder beside ``target``; when the block ends, publish it as ``target`` atomically.

    Write the folder's files with :func:`write_new_file` (each flushed). If the
    block raises, the staging folder is deleted and ``target`` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_directory(target)  # a leftover .old from an earlier kill must not be taken for this write's
    staging = target.parent / (_STAGING.format(target.name) + secrets.token_hex(4))
    staging.mkdir()  # not mkdtemp, whose folders are private: a checkpoint gets the umask's permissions
    try:
        yield staging
        fsync_directory(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = target.parent / _OLD.format(target.name)
    if target.exists():
        os.rename(target, old)
    os.rename(staging, target)
    fsync_directory(target.parent)  # the new folder is the one on disk from here on
    if old.exists():
        shutil.rmtree(old)


def write_new_file(path: Path, data: bytes) -> Path:
    """Create ``path`` (which must not exist, e.g. inside a staging folder) with ``data``, flushed to the disk."""
    _write_new(Path(path), data)
    return Path(path)
