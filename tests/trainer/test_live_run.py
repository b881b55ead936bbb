"""A real ``foxhunt train`` process: Prometheus scraped while it trains, then Ctrl-C, then ``--resume``.

One child process serves all three checks, because starting one costs the
kernels' compile time (tens of seconds on 2 cores): it is scraped once its
first epoch has written a metrics line, then sent SIGINT.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from prometheus_client.parser import text_string_to_metric_families
from trainer_testkit import LIVE, foxhunt_process, invoke, read_summary, train_args

from foxhunt.cli.common import EXIT_STOPPED

START_TIMEOUT_S = 300.0  # first metrics line: interpreter start, numba compile, one epoch
SCRAPE_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 120.0
EPOCHS = 2 * 12  # folds x epochs of the LIVE config


@attrs.frozen
class LiveRun:
    run_dir: Path
    scrape: str
    alive_at_scrape: bool
    exit_code: int
    stdout: str
    stderr: str


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def metric_lines(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def monitor_samples(text: str) -> list:
    return [s for family in text_string_to_metric_families(text) if family.name == "foxhunt_monitor_value" for s in family.samples]


def scrape_until_monitors(url: str) -> str:
    """GET ``url`` until it shows monitor gauges (bounded attempts and total time); returns the text."""
    deadline = time.monotonic() + SCRAPE_TIMEOUT_S
    last = "no response"
    for _ in range(200):
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode("utf-8")
            if monitor_samples(text):
                return text
            last = "a response without foxhunt_monitor_value samples"
        except (urllib.error.URLError, ConnectionError) as error:
            last = repr(error)
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    pytest.fail(f"{url} never showed foxhunt_monitor_value within {SCRAPE_TIMEOUT_S:.0f} s (last: {last})")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, _private_feature_cache: Path) -> LiveRun:
    root = tmp_path_factory.mktemp("live")
    run_dir = root / "run"
    port = free_port()
    env = dict(os.environ, COLUMNS="240")
    process = foxhunt_process([*train_args(run_dir, LIVE), "--metrics-port", str(port)], root / "logs", env)
    try:
        wait_for(lambda: metric_lines(run_dir) >= 1 or process.poll() is not None, START_TIMEOUT_S, "the first metrics line")
        assert process.poll() is None, (root / "logs" / "stderr.txt").read_text(encoding="utf-8")[-4000:]
        scrape = scrape_until_monitors(f"http://127.0.0.1:{port}/metrics")
        alive = process.poll() is None
        process.send_signal(signal.SIGINT)
        exit_code = process.wait(timeout=STOP_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return LiveRun(
        run_dir, scrape, alive, exit_code,
        (root / "logs" / "stdout.txt").read_text(encoding="utf-8"), (root / "logs" / "stderr.txt").read_text(encoding="utf-8"),
    )


def test_prometheus_scrape_during_a_run_has_labelled_finite_gauges(live: LiveRun) -> None:
    assert live.alive_at_scrape
    samples = monitor_samples(live.scrape)
    for sample in samples:
        assert {"run", "fold", "component"} <= set(sample.labels)
        assert sample.labels["run"] == live.run_dir.name
        assert math.isfinite(sample.value), sample
    folds = {s.labels["fold"] for s in samples}
    assert "0" in folds and folds <= {"0", "1"}
    components = {s.labels["component"] for s in samples}
    assert {"health", "tau", "gamma", "epsilon", "support", "grad_balance", "gradients"} <= components
    families = {family.name: family.samples for family in text_string_to_metric_families(live.scrape)}
    health = [s.value for s in families["foxhunt_health"]]
    assert health and all(0.0 <= value <= 1.0 for value in health)


def test_sigint_stops_cleanly_with_a_resume_checkpoint(live: LiveRun) -> None:
    assert live.exit_code == EXIT_STOPPED, live.stderr[-4000:]  # a graceful stop is not a finished run
    assert "--resume" in live.stdout and str(live.run_dir) in live.stdout.replace("\n", "")
    assert "Traceback" not in live.stderr
    assert (live.run_dir / "checkpoints" / "resume" / "metadata.json").exists()
    assert not (live.run_dir / "summary.json").exists()
    assert 1 <= metric_lines(live.run_dir) < EPOCHS
    events = [json.loads(line)["event"] for line in live.stderr.splitlines() if line.startswith("{")]
    assert "stopped at a safe point" in events


def test_resume_after_sigint_ends_with_the_uninterrupted_summary(live: LiveRun, live_reference_run: Path) -> None:
    result = invoke("train", "--resume", str(live.run_dir), "--no-progress")
    assert result.exit_code == 0, result.output
    assert read_summary(live.run_dir) == read_summary(live_reference_run)
    assert (live.run_dir / "summary.json").read_bytes() == (live_reference_run / "summary.json").read_bytes()
    assert metric_lines(live.run_dir) == EPOCHS
