"""foxhunt's pre-commit hook programs (see docs/hooks.md).

This folder is not part of the installed ``foxhunt`` distribution: setup.py
installs only ``foxhunt`` and ``foxhunt_plugins``, so the name ``hooks`` never
lands in site-packages. Each module is a stand-alone program that uses the
standard library only, runnable two ways:

    python -m hooks.<name> FILES...      # from the repository root
    python hooks/<name>.py FILES...      # from anywhere (what .pre-commit-hooks.yaml runs)

For that reason the modules do not import each other.
"""
