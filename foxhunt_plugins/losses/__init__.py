"""Built-in loss components, one plugin module each (each with its own hooks; none imports another).

Default gradient budgets (``DEFAULT_BUDGET`` in each module; ``[learner.budgets]``
overrides them) sum to exactly 1 when all five are enabled:

========== ======
component  budget
========== ======
c51        0.40
iqn        0.20
mse        0.15
ensemble   0.15
cql        0.10
========== ======

Disabling a component means re-balancing the others in ``[learner.budgets]``;
the learner refuses budgets that do not sum to 1 (invariant 9).

``iql`` (the IQL value head, budget 0.10) is opt-in: it returns its component
only with ``[plugins.iql] enabled = true``, and a run that enables it gives it
a share of another's budget (e.g. ``c51 = 0.30``).

``auxiliary`` (the auxiliary tasks ``aux_return`` and ``aux_regime``, budget
0.05 each) is opt-in the same way: ``[plugins.auxiliary] enabled = true`` and
``c51 = 0.30``.
"""

__all__: list[str] = []
