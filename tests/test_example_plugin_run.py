"""The out-of-tree Huber loss (examples/huber-loss-plugin, installed by scripts/install.sh --test)
trains through `foxhunt train` like a built-in: its budget and gradient norms reach the metrics and the report."""

from __future__ import annotations

import importlib.metadata as metadata
import json

from click.testing import CliRunner
from tiny_run import TINY_RUN

from foxhunt.cli.main import cli


def test_the_example_plugin_is_installed_through_its_entry_point():
    names = {ep.name: ep.dist.name for ep in metadata.entry_points(group="foxhunt.plugins")}
    assert names.get("huber") == "foxhunt-huber-loss", "run `bash scripts/install.sh --test` to install the example"


def test_a_run_with_the_huber_loss_records_its_budget_and_gradient_norms(tmp_path, monkeypatch):
    monkeypatch.setenv("FOXHUNT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        ["train", "--data", "synthetic:planted?bars=600&seed=2", "--out", str(out), "--no-progress",
         "--set", 'plugins.disable=["mse"]', "--set", "plugins.huber.enabled=true", "--set", "learner.budgets.huber=0.15",
         *TINY_RUN],
    )
    assert result.exit_code == 0, result.output
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["budgets"]["huber"] == 0.15
    assert "mse" not in row["budgets"]
    assert abs(sum(row["budgets"].values()) - 1.0) < 1e-12
    assert row["grad_norms"]["huber"] > 0.0
    assert 0.0 < row["grad_norms_clipped"]["huber"] <= row["grad_norms"]["huber"] + 1e-9
    assert row["losses"]["huber"] >= 0.0
    report = (out / "report.html").read_text()
    assert "<td>huber</td><td>0.150</td>" in report
    assert json.loads((out / "plugins.json").read_text())["huber"]["distribution"] == "foxhunt-huber-loss"
