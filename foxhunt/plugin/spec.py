"""Every hook a foxhunt plugin can implement, in one place.

A plugin is a module (or object) listed in the ``foxhunt.plugins`` entry-point
group whose functions are marked with :data:`foxhunt.hookimpl` and named after
the specs below. A function named ``foxhunt_*`` that matches no spec (a typo
such as ``foxhunt_delcare``) stops the run: pluggy's ``check_pending`` reports it.

Order of calls in a run: ``foxhunt_declare`` once per plugin while the manager
is *declaring*; then, after freeze, each component hook once.

A plugin's own settings (``registrar.settings(cls)`` in ``foxhunt_declare``,
set by users under ``[plugins.<name>]``) reach its component hooks as the
``settings`` argument: the resolved instance of its class, ``None`` for a
plugin that declares none. Like every hook argument it may be left out of an
implementation's signature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from foxhunt.features import FeatureDef, FeatureSet
    from foxhunt.monitoring.monitors import AdaptiveMonitor
    from foxhunt.plugin.records import Encoder, GradientCombiner, Kernel, LossComponent, ReplayAugmentation
    from foxhunt.plugin.registrar import Registrar

__all__ = ["hookspec", "hookimpl", "PROJECT_NAME"]

PROJECT_NAME = "foxhunt"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def foxhunt_declare(registrar: Registrar) -> None:
    """Claim everything the plugin owns, before the layout is frozen.

    :param registrar: a :class:`foxhunt.plugin.registrar.Registrar` bound to this
        plugin. Use ``registrar.slot(...)`` for ISV slots,
        ``registrar.state(...)`` for state-reset entries (every slot and every
        piece of training state needs one), ``registrar.dims(Table)`` for
        named-dimension tables and ``registrar.settings(cls)`` for the
        plugin's ``[plugins.<name>]`` settings (returns the resolved instance).

    Called once per plugin, in the *declaring* phase, each plugin with its own
    registrar. All results are ignored; problems are collected across plugins
    and reported together.
    """


@hookspec
def foxhunt_loss_components(config: Any, settings: Any) -> list[LossComponent]:
    """Return the loss components this plugin adds to the learner.

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none).
    :return: a list of :class:`foxhunt.plugin.records.LossComponent` (may be empty).

    Called once after freeze. Results from every plugin are concatenated; two
    components with the same name stop the run.
    """


@hookspec
def foxhunt_gradient_combiners(config: Any, settings: Any) -> list[GradientCombiner]:
    """Return the gradient combiners this plugin offers the learner.

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none).
    :return: a list of :class:`foxhunt.plugin.records.GradientCombiner` (may be empty).

    Called once after freeze. Results from every plugin are concatenated (the core's learner plugin
    provides ``budgeted_sum``); two combiners with the same name stop the run. The learner uses the one
    ``[learner] combiner`` names; a name no loaded plugin provides is refused before the run starts,
    listing the available ones.
    """


@hookspec
def foxhunt_monitors(config: Any, settings: Any) -> list[AdaptiveMonitor]:
    """Return the read-only monitors this plugin adds.

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none).
    :return: a list of :class:`foxhunt.monitoring.monitors.AdaptiveMonitor` instances.

    Called once after freeze. Monitors receive read-only ISV views only.
    """


@hookspec
def foxhunt_kernels(config: Any, settings: Any) -> list[Kernel]:
    """Return the device kernels this plugin adds (adaptive kernels, the environment's physics).

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none).
    :return: a list of :class:`foxhunt.plugin.records.Kernel`; each kernel's ``writes``
        must name ISV slots its own plugin declared.

    Called once after freeze. Two kernels with the same name stop the run.
    """


@hookspec
def foxhunt_encoders(config: Any, settings: Any) -> list[Encoder]:
    """Return the encoders this plugin offers the learner: what turns the last W bars into the trunk's input.

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none); an encoder that
        needs them at build time puts them in its record's ``settings``.
    :return: a list of :class:`foxhunt.plugin.records.Encoder` (may be empty).

    Called once after freeze. Results from every plugin are concatenated (the core's learner plugin provides
    ``mlp``, the one-bar default); two encoders with the same name stop the run. The learner uses the one
    ``[learner] encoder`` names; a name no loaded plugin provides is refused before the run starts, listing
    the available ones.
    """


@hookspec
def foxhunt_replay_augmentations(config: Any, settings: Any) -> list[ReplayAugmentation]:
    """Return the replay augmentations this plugin applies to sampled batches.

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none).
    :return: a list of :class:`foxhunt.plugin.records.ReplayAugmentation` (empty when the plugin is switched off).

    Called once after freeze. Results from every plugin are concatenated; two augmentations with the same
    name stop the run. The replay applies every one returned to each sampled batch, in the order of their
    names, once the trainer has given it the fold (``Replay.set_fold``).
    """


@hookspec
def foxhunt_features(config: Any, settings: Any) -> list[FeatureDef]:
    """Return the feature families this plugin adds to the feature-name grammar.

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none).
    :return: a list of :class:`foxhunt.features.FeatureDef` (base name, arity, needs, a causal compute,
        description, mirror parity and a formula ``version``; may be empty).

    Called once after freeze, before the market's features are computed. The families join the core's
    (``foxhunt/features/library.py``) in the run's :class:`foxhunt.features.FeatureTable`; a base that is the
    core's or another plugin's stops the run naming both. Each family's plugin name and ``version`` are part
    of the cache key of every matrix that uses it: bump ``version`` when its values change.
    """


@hookspec
def foxhunt_feature_sets(config: Any, settings: Any) -> list[FeatureSet]:
    """Return the named feature sets this plugin offers ``[features] feature_set``.

    :param config: the resolved :class:`foxhunt.config.FoxhuntConfig`.
    :param settings: this plugin's resolved settings (``None`` when it declares none).
    :return: a list of :class:`foxhunt.features.FeatureSet` (may be empty); every name in a set must be a
        family of the run's table (the core's or a loaded plugin's).

    Called once after freeze. A set name that is the core's or another plugin's stops the run naming both.
    """
