"""Package discovery only: the built-in plugins live in ``plugins/`` but install as ``foxhunt_plugins``.

Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

core_packages = find_packages(include=["foxhunt", "foxhunt.*"])
plugin_packages = ["foxhunt_plugins"] + [f"foxhunt_plugins.{name}" for name in find_packages(where="plugins")]

setup(
    packages=core_packages + plugin_packages,
    package_dir={"foxhunt_plugins": "plugins"},
)
