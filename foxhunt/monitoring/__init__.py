"""Monitoring: what observes a run without changing it (invariant 8).

- :mod:`foxhunt.monitoring.monitors`: the read-only observer protocol (``AdaptiveMonitor``, ``DiagSnapshot``,
  ``SignalSnapshot``) and the monitors' state entries;
- :mod:`foxhunt.monitoring.epoch_diagnostics`: once per epoch boundary, every monitor on read-only snapshots
  and one ``health_diag`` event;
- :mod:`foxhunt.monitoring.metrics_export`: the monitors' snapshots as Prometheus gauges, a registry per run.

Plugin authors use the root package :mod:`foxhunt` (its ``__all__``), not these modules.
"""
