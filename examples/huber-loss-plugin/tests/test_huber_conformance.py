"""The foxhunt conformance machine, run against this plugin with the Huber loss switched on."""

from foxhunt.config import load_config
from foxhunt.testing import conformance_machine

import foxhunt_huber

# Opt-in plugin: the config that switches it on ([plugins.huber] enabled = true) is the one a run with it would use.
ENABLED = load_config(None, ["plugins.huber.enabled=true"])

TestHuberConformance = conformance_machine(foxhunt_huber, "huber", ENABLED)
