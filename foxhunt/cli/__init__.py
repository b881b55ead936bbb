"""The ``foxhunt`` command line (click). Entry point: :func:`foxhunt.cli.main.main`."""
