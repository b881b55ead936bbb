"""The foxhunt conformance machine, run against this plugin with the Huber loss switched on."""

from foxhunt.config import FoxhuntConfig
from foxhunt.plugins import PluginSelection
from foxhunt.testing import conformance_machine

import foxhunt_huber

# Opt-in plugin: the config that enables it is the one a run with the Huber loss would use.
ENABLED = FoxhuntConfig(plugins=PluginSelection(enable=("huber",)))

TestHuberConformance = conformance_machine(foxhunt_huber, "huber", ENABLED)
