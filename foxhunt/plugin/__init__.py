"""The plugin machinery: the hooks a plugin implements, the host that loads and checks plugins, what they return.

- :mod:`foxhunt.plugin.spec`: every hook (``foxhunt_declare`` and the component hooks) and the markers;
- :mod:`foxhunt.plugin.host`: :class:`~foxhunt.plugin.host.PluginHost`, discovery, selection, lifecycle,
  the one report of every problem, the component hooks with their validation;
- :mod:`foxhunt.plugin.registrar`: what ``foxhunt_declare`` receives (slots, state, dimensions, settings);
- :mod:`foxhunt.plugin.records`: the typed records the component hooks return;
- :mod:`foxhunt.plugin.settings`: ``[plugins]``, the selection and each plugin's settings table;
- :mod:`foxhunt.plugin.core_declarations`: the core's own declarations, registered as plugin ``foxhunt``;
- :mod:`foxhunt.plugin.foreign_writes`: the run-start check that each kernel writes only its own slots.

Plugin authors use the root package :mod:`foxhunt` (its ``__all__``), not these modules.
"""
