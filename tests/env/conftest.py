"""The environment tests' fixtures come from the shared builders (tests/env_builders.py)."""

from env_builders import instrument, market  # noqa: F401 - fixtures, collected from this namespace
