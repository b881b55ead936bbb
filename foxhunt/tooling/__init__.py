"""Tooling: the checks and generated files that keep the repository honest, run by ``foxhunt audit`` and
``foxhunt registry``, never by a training run.

- :mod:`foxhunt.tooling.audit`: every component of every installed plugin has an audit row; no slot a kernel
  writes goes unread; the named-dimension reference;
- :mod:`foxhunt.tooling.slot_readers`: who writes and who reads each ISV slot (for the audit and the docs);
- :mod:`foxhunt.tooling.contract_docs`: docs/adaptive.md's slot and signal tables, generated from
  :mod:`foxhunt.contract` and the built-in plugins;
- :mod:`foxhunt.tooling.snapshots`: the committed ``registry/`` snapshots of the built-in plugin set.
"""
