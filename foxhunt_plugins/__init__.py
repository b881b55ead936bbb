"""foxhunt's built-in plugins (installed as ``foxhunt_plugins``).

Each module is one plugin, listed in the ``foxhunt.plugins`` entry-point group
of foxhunt's own distribution and loaded exactly like a third-party plugin. The
core never imports these modules by name, and they never import each other.
"""
