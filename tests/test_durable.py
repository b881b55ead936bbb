"""Files and checkpoint folders are replaced whole or not at all, wherever a crash interrupts the write.

A crash is simulated by failing the k-th file-system operation of a write and
every one after it (so no clean-up runs, as after SIGKILL or a power cut); the
state left on disk is then recovered as a restarted process would, and must be
the previous version or the new one, complete.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

import pytest
import torch

from foxhunt import ISV, IsvLayout, Slot, durable
from foxhunt.checkpoint import load_checkpoint, save_checkpoint
from foxhunt.errors import FoxhuntError


class Crash(BaseException):
    """The process died here (a BaseException, so no `except Exception` clean-up path can swallow it)."""


class _Crashing:
    """Stands in for a module in ``foxhunt.durable``: operation number ``at`` and every later one crash."""

    def __init__(self, module, names: tuple[str, ...], counter: list[int], at: int) -> None:
        self._module, self._names, self._counter, self._at = module, names, counter, at

    def __getattr__(self, name: str):
        real = getattr(self._module, name)
        if name not in self._names:
            return real

        def operation(*args, **kwargs):
            self._counter[0] += 1
            if self._counter[0] > self._at:
                raise Crash(name)
            return real(*args, **kwargs)
        return operation


def crashing_at(monkeypatch: pytest.MonkeyPatch, at: int) -> list[int]:
    """From now on, the ``at``-th file-system operation of :mod:`foxhunt.durable` (0-based) and all after it crash."""
    counter = [0]
    monkeypatch.setattr(durable, "os", _Crashing(os, ("open", "write", "fsync", "rename", "replace", "unlink"), counter, at))
    monkeypatch.setattr(durable, "shutil", _Crashing(shutil, ("rmtree",), counter, at))
    return counter


def operations_of(write) -> int:
    """How many file-system operations ``write`` makes when nothing crashes."""
    with pytest.MonkeyPatch.context() as patch:
        counter = crashing_at(patch, 10**9)
        write()
    return counter[0]


LAYOUT = IsvLayout.compose([Slot("tau.value", 1, "tau", init=0.005)])


def checkpoint(tmp: Path, version: float) -> None:
    save_checkpoint(tmp / "ckpt", {"isv": ISV(LAYOUT).tensor, "w": torch.full((64,), version)}, {"version": version}, LAYOUT)


def overwrite_operations(tmp: Path) -> int:
    """File-system operations of a checkpoint write that replaces an existing one."""
    checkpoint(tmp, 1.0)
    return operations_of(lambda: checkpoint(tmp, 2.0))


def test_a_crash_anywhere_in_a_checkpoint_write_leaves_the_old_or_the_new_one_whole(tmp_path: Path) -> None:
    total = overwrite_operations(tmp_path / "count")
    seen, versions = set(), []
    for at in range(total + 1):  # every crash point, and no crash
        tmp = tmp_path / f"crash_{at}"
        checkpoint(tmp, 1.0)
        with pytest.MonkeyPatch.context() as patch:
            crashing_at(patch, at)
            try:
                checkpoint(tmp, 2.0)
            except Crash:
                pass
        seen.add(tuple(sorted(p.name.split("-")[0] for p in tmp.iterdir())))
        durable.recover_directory(tmp / "ckpt")  # what the next process does first
        tensors, metadata = load_checkpoint(tmp / "ckpt", LAYOUT)  # verifies both hashes: no mix of old and new
        versions.append(metadata["version"])
        assert torch.equal(tensors["w"], torch.full((64,), metadata["version"]))
        assert sorted(p.name for p in tmp.iterdir()) == ["ckpt"], at  # no staging or old copy left behind
    # old until the new folder takes the name (one rename), new from there on
    assert versions == sorted(versions) and versions[0] == 1.0 and versions[-1] == 2.0
    # the states a kill can leave: staging beside the old one, the old one moved aside, old beside new
    assert {(".ckpt.new", "ckpt"), (".ckpt.new", ".ckpt.old"), (".ckpt.old", "ckpt"), ("ckpt",)} <= seen


def test_a_crash_anywhere_in_a_file_write_leaves_the_old_or_the_new_content(tmp_path: Path) -> None:
    total = operations_of(lambda: durable.write_text(tmp_path / "count", "x"))
    contents = []
    for at in range(total + 1):
        target = durable.write_text(tmp_path / f"summary_{at}.json", "old\n")
        with pytest.MonkeyPatch.context() as patch:
            crashing_at(patch, at)
            try:
                durable.write_text(target, "new\n" * 1000)
            except Crash:
                pass
        contents.append(target.read_text(encoding="utf-8"))
    assert set(contents[:1]) == {"old\n"} and contents[-1] == "new\n" * 1000
    assert contents == sorted(contents, key=lambda text: text != "old\n")  # old, then new: never anything else


def test_files_get_the_permissions_of_the_umask_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        path = durable.write_text(tmp_path / "config.toml", "a = 1\n")
        checkpoint(tmp_path, 1.0)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "ckpt").stat().st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "config.toml"]


@pytest.mark.parametrize(
    ("left", "expected"),
    [
        ({"ckpt": 2.0, ".ckpt.old": 1.0}, 2.0),  # killed after the new folder took the name
        ({".ckpt.old": 1.0}, 1.0),  # killed between the two renames
        ({"ckpt": 1.0, ".ckpt.new-0bad": 2.0}, 1.0),  # killed while the new folder was being filled
    ],
    ids=["old-left-beside-new", "only-old", "staging-left"],
)
def test_recovery_of_each_interrupted_state(tmp_path: Path, left: dict[str, float], expected: float) -> None:
    for name, version in left.items():
        checkpoint(tmp_path / "make", version)
        os.rename(tmp_path / "make" / "ckpt", tmp_path / name)
    shutil.rmtree(tmp_path / "make")
    assert durable.recover_directory(tmp_path / "ckpt") is not None
    _, metadata = load_checkpoint(tmp_path / "ckpt", LAYOUT)
    assert metadata["version"] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert durable.recover_directory(tmp_path / "ckpt") is None  # nothing left to do


def test_a_full_disk_keeps_the_previous_checkpoint_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint(tmp_path, 1.0)

    def full(handle: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(durable, "write_all", full)
    with pytest.raises(FoxhuntError) as caught:
        checkpoint(tmp_path, 2.0)
    message = str(caught.value)
    assert str(tmp_path / "ckpt") in message and "No space left on device" in message
    assert "previous checkpoint is kept" in message
    monkeypatch.undo()
    _, metadata = load_checkpoint(tmp_path / "ckpt", LAYOUT)
    assert metadata["version"] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
