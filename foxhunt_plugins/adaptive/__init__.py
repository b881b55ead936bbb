"""The built-in adaptive mechanisms: one plugin module per mechanism (health, tau, gamma, epsilon,
support, grad_balance, static).

Each module declares the ISV slots it owns (with their state-reset entries),
returns its device kernel from ``foxhunt_kernels`` and its read-only monitor
from ``foxhunt_monitors``. Kernels compute every adaptive value on the device
and write it into the ISV; monitors only read. The modules share the plumbing
in :mod:`foxhunt_plugins.adaptive.common` and never import each other: a slot
another mechanism owns (``health.value``) is read through the layout, with a
documented default when that mechanism is not loaded. See docs/adaptive.md.
"""
