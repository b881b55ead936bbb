"""One writer per run folder: a second one is refused with the first one's PID and host; a dead one's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from trainer_testkit import invoke, train_args

from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.run_lock import LOCK_FILE, RunLock, RunLocked

# A process other than this one writing a run as foxhunt does (marker; flock plus PID and host), until its stdin
# closes. Plain Python: importing foxhunt would cost seconds.
HOLDER = """
import fcntl, json, os, socket, sys
with open(os.path.join(os.path.dirname(sys.argv[1]), "foxhunt-run.json"), "w") as marker:
    marker.write(json.dumps({"kind": "train"}))
handle = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(handle, fcntl.LOCK_EX)
os.write(handle, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "then"}).encode())
print("locked", flush=True)
sys.stdin.read()
"""


def holding(folder: Path) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder / LOCK_FILE)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "locked\n"
    return process


def test_the_lock_file_names_this_process_and_goes_away_on_release(tmp_path: Path) -> None:
    lock = RunLock(tmp_path)
    lock.acquire()
    holder = json.loads((tmp_path / LOCK_FILE).read_text(encoding="utf-8"))
    assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname() and holder["started"]
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()
    lock.release()  # twice is harmless


def test_a_second_writer_in_this_process_is_refused(tmp_path: Path) -> None:
    first = RunDirectory(tmp_path / "run")
    with pytest.raises(RunLocked, match=rf"PID {os.getpid()} on host {socket.gethostname()}"):
        RunDirectory(tmp_path / "run", resume=True)
    first.release()
    RunDirectory(tmp_path / "run", resume=True).release()


def test_a_writer_in_another_live_process_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    process = holding(folder)
    try:
        before = sorted(folder.iterdir())
        with pytest.raises(RunLocked) as caught:
            RunDirectory(folder)
        assert f"PID {process.pid} on host {socket.gethostname()}" in str(caught.value)
        assert sorted(folder.iterdir()) == before
    finally:
        process.stdin.close()
        process.wait()


def test_the_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    process = holding(folder)
    process.kill()  # SIGKILL: its lock file stays, naming a dead PID
    process.wait()
    assert json.loads((folder / LOCK_FILE).read_text(encoding="utf-8"))["pid"] == process.pid
    with capture_logs() as logs:
        run_dir = RunDirectory(folder)
    taken = [entry for entry in logs if entry["event"].startswith("took over the lock")]
    assert len(taken) == 1 and taken[0]["pid"] == process.pid and taken[0]["log_level"] == "warning"
    assert json.loads((folder / LOCK_FILE).read_text(encoding="utf-8"))["pid"] == os.getpid()
    run_dir.release()


def test_a_lock_from_another_host_is_not_taken_over(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": "then"}), encoding="utf-8")
    with pytest.raises(RunLocked, match=r"PID 1 on host elsewhere .*delete the lock file"):
        RunLock(tmp_path).acquire()


def test_foxhunt_train_into_a_folder_another_process_writes_exits_2_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    process = holding(folder)
    try:
        result = invoke(*train_args(folder))
    finally:
        process.stdin.close()
        process.wait()
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"PID {process.pid} on host {socket.gethostname()}" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted([LOCK_FILE, "foxhunt-run.json"])  # nothing of its own
