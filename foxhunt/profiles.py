"""Run-size profiles: defaults sized for the device a run trains on.

A CPU run and a GPU run want different sizes and learn best with different
values, each chosen by a measurement on its device. On 2 CPU cores, 64 environments,
batches of 256 and about one update per vector step keep an epoch under a minute; on
an H200 the same sizes leave the GPU idle behind Python launch overhead, and
thousands of environments and a wide collection cost hardly more per step.
The GPU profile's learner budget (batch 1 024, 250 updates per epoch) is set
by what the agent learns, not by what the GPU could do: more updates over the
same training window learned worse (docs/learner.md). Both profiles take the
execution credit and the ``horizons512`` inputs, each measured on its device. ``[run] profile`` picks one of the
tables below: ``"auto"`` (the default) takes ``"gpu"`` when the run's device
is CUDA (``run.device = "cuda"``, or ``"auto"`` on a machine where torch sees
a GPU) and ``"cpu"`` otherwise.

A profile only fills keys the user left out: anything set in the TOML file or
with ``--set`` wins. ``foxhunt config show`` prints the resolved values and
the run's ``config.toml`` records them, with ``run.profile`` set to the profile
that was applied, so a resumed run trains with the same sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foxhunt.config_loading import deep_copy

__all__ = ["PROFILES", "PROFILE_NAMES", "device_name", "resolve_profile", "apply_profile", "plugin_defaults"]

# Dotted config key -> value; keys a profile leaves out take the config classes' own defaults.
PROFILES: dict[str, dict[str, Any]] = {
    # Chosen by a study on CPU runs (docs/tune.md, "The defaults study": `foxhunt tune` over four synthetic
    # markets, then checked on fresh seeds): a larger batch at a lower learning rate and nearly half of each
    # batch mirrored. Batch and updates keep a default run within 3 minutes on 2 cores. The study also chose
    # the `ohlcv` inputs, on synthetic bars whose limit orders filled for free; once the bars' highs and lows
    # came from a Brownian bridge, the class default `horizons` learned better on all four markets of seeds
    # 10-12 (docs/tune.md, "After the limit-order fix"), so the profile keeps the class's inputs.
    "cpu": {
        "learner.lr": 1.8e-4,
        "learner.n_step": 3,
        "learner.batch_size": 256,
        "train.updates_per_epoch": 226,
        "plugins.mirror.fraction": 0.45,
        "plugins.epsilon.decay_fraction": 0.57,
        # Measured on the default run, seeds 13-17 (docs/learner.md, "Execution credit and a 256-bar level"):
        # with both, no seed of a signal market stopped trading and mean reversion went from 0.09 to 0.20 of
        # the oracle, at more random-walk trading (11 round trips to 114).
        "learner.execution_regret": True,
        "learner.shaping_only": True,
        # Over seeds 13-27 with anchored folds the 512-bar level beside the 256-bar one lifted mean reversion
        # from 0.16 to 0.57 of the oracle (ahead on 12 of 15 seeds) and kept the trend and the weak AR(1) above
        # half of it (0.68 and 0.64, against 0.81 and 0.80): docs/learner.md, "Both profiles take the 512-bar level".
        "features.feature_set": "horizons512",
    },
    "gpu": {
        "env.n_envs": 4096,
        # Learning, not speed, sets these two: on a fold's few thousand training bars, 1 000 updates of
        # 8 192 per epoch over-fit the window (docs/learner.md, "The GPU profile's replay budget").
        "learner.batch_size": 1024,
        "learner.replay.capacity": 1 << 20,
        "learner.compile": True,
        "train.env_steps_per_epoch": 4096 * 250,
        "train.updates_per_epoch": 250,
        "train.warmup_env_steps": 4096 * 16,
        # Measured on one H200, seeds 13-15 and 18-19 (docs/learner.md, "The GPU profile and the execution
        # credit"): with them no seed of a signal market stopped trading (three of five mean-reversion seeds made
        # no trade without), and the trend went from 0.33 to 0.99 of the oracle.
        "learner.execution_regret": True,
        "learner.shaping_only": True,
        # On one H100, seeds 13-27: mean reversion from 0.17 to 0.53 of the oracle (ahead on 12 of 15), the trend
        # from 0.67 to 0.85, the weak AR(1) level (0.49 against 0.48): the same section.
        "features.feature_set": "horizons512",
    },
}
PROFILE_NAMES = ("auto", *PROFILES)


def device_name(device: str) -> str:
    """``run.device`` made concrete: ``auto`` is ``cuda`` when torch sees a GPU, else ``cpu``; others as given."""
    if device != "auto":
        return device
    import torch  # only when the machine must be asked: `config show` on a CPU config stays light

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_profile(data: Mapping[str, Any]) -> str:
    """The concrete profile (``cpu`` or ``gpu``) for plain config ``data`` (``run.profile``, ``run.device``)."""
    run = data.get("run", {}) if isinstance(data.get("run", {}), Mapping) else {}
    profile = run.get("profile", "auto")
    if profile != "auto":
        return profile
    return "gpu" if device_name(run.get("device", "auto")) == "cuda" else "cpu"


def plugin_defaults(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The resolved profile's values for plugin settings, ``{plugin: {key: value}}``.

    They are defaults, not ``[plugins.<name>]`` sections: a plugin that declares its settings gets them under
    what the user wrote, and a plugin the run does not load (disabled, left out of ``only``, or not installed)
    never sees them, where a section of its own would be refused as a mistake.
    """
    profile = resolve_profile(data)
    if not isinstance(profile, str) or profile not in PROFILES:
        return {}
    defaults: dict[str, dict[str, Any]] = {}
    for dotted, value in PROFILES[profile].items():
        section, *rest = dotted.split(".")
        if section == "plugins":
            name, key = rest
            defaults.setdefault(name, {})[key] = value
    return defaults


def apply_profile(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the resolved profile's values filled in wherever the user set nothing (a copy)."""
    profile = resolve_profile(data)
    if not isinstance(profile, str) or profile not in PROFILES:
        # An unknown name, or not a name at all (a list from `--set run.profile=[]` was unhashable here): the
        # config's own validator reports it with the key path.
        return data
    result = deep_copy(data)
    for dotted, value in PROFILES[profile].items():
        *sections, key = dotted.split(".")
        if sections[0] == "plugins":
            continue  # plugin_defaults(): a plugin's settings are its own, resolved when it declares them
        node = result
        for section in sections:
            child = node.setdefault(section, {})
            if not isinstance(child, dict):
                break  # a value where a section belongs: structuring reports it
            node = child
        else:
            node.setdefault(key, value)
    run = result.setdefault("run", {})
    if isinstance(run, dict):
        run["profile"] = profile
    return result

