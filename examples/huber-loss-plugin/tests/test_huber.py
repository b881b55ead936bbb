"""The Huber loss: its values, its gradient bound, its settings (switch and κ), its discovery and its audit row."""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import foxhunt_huber
from foxhunt.tooling.audit import check, parse_rows
from foxhunt.config import FoxhuntConfig, load_config
from foxhunt.testing import make_host
from foxhunt_huber.loss import KAPPA, huber

ROOT = Path(__file__).resolve().parents[1]


def reference(delta: float, kappa: float) -> float:
    """The textbook piecewise definition, in float64."""
    return 0.5 * delta * delta if abs(delta) <= kappa else kappa * (abs(delta) - 0.5 * kappa)


@settings(deadline=None, max_examples=25)  # the first example pays torch's warm-up
@given(
    st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=16),
    st.floats(0.05, 5.0),
)
def test_huber_matches_the_piecewise_definition(deltas, kappa):
    values = huber(torch.tensor(deltas, dtype=torch.float64), kappa)
    expected = torch.tensor([reference(d, kappa) for d in deltas], dtype=torch.float64)
    torch.testing.assert_close(values, expected, rtol=1e-12, atol=1e-12)


def test_gradient_is_bounded_by_kappa():
    delta = torch.tensor([-100.0, -1.0, -0.25, 0.0, 0.5, 3.0, 1e4], requires_grad=True)
    huber(delta).sum().backward()
    expected = torch.clamp(delta.detach(), -KAPPA, KAPPA)
    torch.testing.assert_close(delta.grad, expected)


def test_off_unless_the_run_switches_it_on(plugin_host, add_plugin):
    host = add_plugin(foxhunt_huber, "huber")
    host.declare()
    host.freeze()
    assert host.loss_components(FoxhuntConfig()) == []
    assert host.settings("huber") == foxhunt_huber.HuberSettings(enabled=False, kappa=KAPPA)


def test_enabled_with_its_own_kappa_from_the_plugins_section():
    config = load_config(None, ["plugins.huber.enabled=true", "plugins.huber.kappa=0.5"])
    host = make_host((foxhunt_huber, "huber"), selection=config.plugins)
    host.declare()
    host.freeze()
    (component,) = host.loss_components(config)
    assert component.name == "huber"
    assert component.budget == foxhunt_huber.DEFAULT_BUDGET
    assert "κ = 0.5" in component.description
    # the configured κ is the one the loss uses: an error of 3 costs κ(3 − κ/2)
    torch.testing.assert_close(component.loss(StubInputs(3.0)), torch.tensor(0.5 * (3.0 - 0.25)))


class StubInputs:
    """The few ``LossInputs`` members the Huber loss uses: one sample, one branch, Q − y = ``error``."""

    def __init__(self, error: float) -> None:
        self.online = type("Online", (), {"q": torch.tensor([[[error]]])})()
        self.target_q = torch.zeros(1, 1)

    def taken(self, values):
        return values[..., 0]

    def branch_mean(self, values):
        return values.mean(-1)

    def batch_mean(self, values):
        return values.mean()


def installed_entry_point():
    matches = [ep for ep in metadata.entry_points(group="foxhunt.plugins") if ep.name == "huber"]
    if not matches:
        pytest.fail("the plugin is not installed: pip install -e . (from examples/huber-loss-plugin)")
    return matches[0]


def test_entry_point_loads_this_module():
    assert installed_entry_point().load() is foxhunt_huber


def test_audit_row_shipped_with_the_code_matches_the_table():
    shipped = [(r.name, r.kind, r.plugin, r.status, r.tests) for r in parse_rows(foxhunt_huber.FOXHUNT_AUDIT, "module")]
    table = ROOT / "docs" / "audits" / "components.md"
    committed = [(r.name, r.kind, r.plugin, r.status, r.tests) for r in parse_rows(table.read_text(), str(table))]
    assert shipped == committed


def test_foxhunt_audit_check_covers_this_plugin(tmp_path):
    installed_entry_point()
    # An empty audits folder: the only rows are the ones the plugin ships (FOXHUNT_AUDIT).
    report = check([tmp_path], plugins=["huber"])
    assert report.problems == []
    assert {(c.name, c.kind) for c in report.components} == {("huber", "plugin"), ("huber", "loss")}
