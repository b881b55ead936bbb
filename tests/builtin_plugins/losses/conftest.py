"""The loss-plugin tests build on the shared small-learner builders (tests/learner_builders.py)."""

from learner_builders import *  # noqa: F403 - fixtures and builders are this conftest's namespace
