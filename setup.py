"""Package discovery only: the core ``foxhunt`` and the built-in plugins ``foxhunt_plugins``.

Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["foxhunt", "foxhunt.*", "foxhunt_plugins", "foxhunt_plugins.*"]))
