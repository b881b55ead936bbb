"""Checks a resolved config must pass before a run builds anything: across keys, and against this machine.

Single-key ranges are attrs validators on the config classes (reported by
:mod:`foxhunt.config_loading` with their key path). What one key cannot say
alone is checked here, once, by :func:`check_config`, after the run-size
profile has been applied: ``foxhunt train`` and each ``foxhunt tune`` trial
call it before the run directory is created. Every problem found is listed in
one :class:`~foxhunt.errors.ConfigError`, a line per problem, each naming its key.
Then the selected plugins are loaded and declare, so that a bad
``[plugins.<name>]`` table (or any plugin problem) is refused as one
:class:`~foxhunt.errors.PluginError` before the run directory exists too.

Memory is estimated with :func:`estimate_memory`, a deliberately simple sum of
the big allocations, in 4-byte words (``D`` observation width, ``Br`` action
branches, ``A`` actions per branch (padded), ``N`` atoms, ``K`` ensemble heads,
``H`` last trunk width, ``hh`` head width, ``T``/``T'`` IQN fractions, ``C``
cosine embedding, ``W`` = D + the trunk widths, ``L`` = 5 loss components):

* env, per environment: ``3·D`` (observation, previous observation, replay
  insert) + ``PS + 2·RNG`` (physics state, int64 RNG lanes) + ``W + 4·Br·A·N``
  (the acting forward);
* replay, per slot of ``capacity``: ``2·D`` (obs, next obs) + ``2·Br`` (int64
  actions) + 3 (reward, done, priority) + 6 (float64 sampling mass and cumsum);
* network: ``P·(5 + L)`` for ``P`` parameters (online, target, gradient, two
  Adam moments, one gradient per loss component in the loop mode);
* per-update batch, per sample: ``12·Br·A·N`` (C51 logits, probabilities,
  targets and their gradients) + ``4·K·(hh + Br·A)`` + ``3·(T + T')·(C + H + hh)``
  + ``T·T'·Br`` (quantile-Huber pairs) + ``6·W`` + ``4·n_step·(Br + 2)``.

It is compared with the machine's physical RAM on the CPU (free RAM leaves out
the reclaimable page cache and changes from second to second; a config is
refused only when it cannot fit at all) and with the free memory of the GPU on
CUDA (``torch.cuda.mem_get_info``). The refusal names the estimate, its parts
and the key whose halving saves the most.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import attrs

from foxhunt.actions import Branch, branch_sizes
from foxhunt.config import FoxhuntConfig
from foxhunt.env.tables import PS, RNG, PortfolioObs
from foxhunt.errors import ConfigError, DataError
from foxhunt.learner.combiners import unknown_combiner
from foxhunt.learner.encoders import unknown_encoder
from foxhunt.plugin.host import PluginHost, config_feature_table
from foxhunt.profiles import device_name

__all__ = ["MemoryEstimate", "estimate_memory", "observation_width", "usable_cpus", "memory_limit", "check_config"]

WORD = 4  # bytes of a float32
LOSS_COMPONENTS = 5  # the built-in loss plugins; each keeps a gradient of its own in the loop mode
# Keys that size the big allocations, and how to halve each (what the refusal suggests lowering).
SIZE_KEYS: dict[str, Callable[[FoxhuntConfig], FoxhuntConfig]] = {
    "env.n_envs": lambda c: _evolve(c, "env", n_envs=max(1, c.env.n_envs // 2)),
    "learner.batch_size": lambda c: _evolve(c, "learner", batch_size=max(1, c.learner.batch_size // 2)),
    "learner.n_atoms": lambda c: _evolve(c, "learner", n_atoms=max(2, c.learner.n_atoms // 2)),
    "learner.ensemble_size": lambda c: _evolve(c, "learner", ensemble_size=max(2, c.learner.ensemble_size // 2)),
    "learner.replay.capacity": lambda c: _evolve(
        c, "learner", replay=attrs.evolve(c.learner.replay, capacity=max(1, c.learner.replay.capacity // 2))
    ),
    "learner.hidden": lambda c: _evolve(c, "learner", hidden=tuple(max(1, w // 2) for w in c.learner.hidden)),
    "learner.head_hidden": lambda c: _evolve(c, "learner", head_hidden=max(1, c.learner.head_hidden // 2)),
    "learner.n_cos": lambda c: _evolve(c, "learner", n_cos=max(1, c.learner.n_cos // 2)),
    "learner.n_quantiles": lambda c: _evolve(c, "learner", n_quantiles=max(1, c.learner.n_quantiles // 2)),
    "learner.n_target_quantiles": lambda c: _evolve(
        c, "learner", n_target_quantiles=max(1, c.learner.n_target_quantiles // 2)
    ),
}


# Money is float64 in backtests, whose 53-bit mantissa counts whole units exactly only up to 2**53 (9.0e15),
# and float32 in the training state: 1e308 of cash became inf there (NaN weights) and overflowed the report's
# plots. No account holds more than 1e15 of any currency.
MAX_INITIAL_CASH = 1e15


def _evolve(config: FoxhuntConfig, section: str, **changes: object) -> FoxhuntConfig:
    return attrs.evolve(config, **{section: attrs.evolve(getattr(config, section), **changes)})


@attrs.frozen
class MemoryEstimate:
    """Bytes of the big allocations of a run (the formula is in the module docstring)."""

    env: int
    replay: int
    network: int
    batch: int

    @property
    def total(self) -> int:
        return self.env + self.replay + self.network + self.batch

    def parts(self) -> str:
        return ", ".join(f"{name} {_size(getattr(self, name))}" for name in ("env", "replay", "network", "batch"))


def observation_width(config: FoxhuntConfig) -> int:
    """Features of the configured set (a feature plugin's set too) plus the portfolio features (what the network
    sees)."""
    return len(config.features.resolve_set(config_feature_table(config)).names) + PortfolioObs.size()


def parameter_count(config: FoxhuntConfig, obs_dim: int) -> int:
    """Exactly the parameters of :class:`~foxhunt.learner.network.BranchingNetwork` (checked by the tests).

    A formula rather than a network built on torch's meta device: the sizes checked here may be absurd, and
    torch refuses to describe a tensor whose element count overflows (found by the hypothesis test)."""
    c = config.learner
    br, a, n, k, hh = len(Branch), max(branch_sizes()), c.n_atoms, c.ensemble_size, c.head_hidden
    widths = (obs_dim, *c.hidden)
    h = widths[-1]
    trunk = sum(i * o + o for i, o in zip(widths[:-1], widths[1:], strict=True))
    value = (h * hh + hh) + (hh * br * n + br * n)
    advantage = br * (h * hh + hh) + br * (hh * a * n + a * n)
    iqn = (c.n_cos * h + h) + (h * hh + hh) + (hh * br * a + br * a)
    ensemble = k * (h * hh + hh) + k * (hh * br * a + br * a)
    return trunk + value + advantage + iqn + ensemble


def estimate_memory(config: FoxhuntConfig, obs_dim: int | None = None) -> MemoryEstimate:
    """The run's big allocations in bytes (see the module docstring for the formula)."""
    c = config.learner
    d = observation_width(config) if obs_dim is None else obs_dim
    br, a, n, k, hh = len(Branch), max(branch_sizes()), c.n_atoms, c.ensemble_size, c.head_hidden
    widths = d + sum(c.hidden)
    t, t2, h = c.n_quantiles, c.n_target_quantiles, c.hidden[-1]
    per_env = 3 * d + PS.size() + 2 * RNG.size() + widths + 4 * br * a * n
    per_slot = 2 * d + 2 * br + 3 + 6
    per_sample = (12 * br * a * n + 4 * k * (hh + br * a) + 3 * (t + t2) * (c.n_cos + h + hh) + t * t2 * br
                  + 6 * widths + 4 * c.n_step * (br + 2))
    return MemoryEstimate(
        env=WORD * config.env.n_envs * per_env,
        replay=WORD * c.replay.capacity * per_slot,
        network=WORD * parameter_count(config, d) * (5 + LOSS_COMPONENTS),
        batch=WORD * c.batch_size * per_sample,
    )


def usable_cpus() -> int:
    """CPU cores this process may run on (its affinity where the OS says, else every core)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def memory_limit(device: str) -> tuple[int, str] | None:
    """``(bytes, what they are)`` a run on ``device`` may fill, or None when it cannot be known here."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return None
        free, _total = torch.cuda.mem_get_info()
        return free, "free GPU memory"
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "RAM on this machine"
    except (ValueError, OSError):  # a platform without these names
        return None


def _size(count: int) -> str:
    if count >= 1 << 70:  # beyond a zebibyte only the order of magnitude means anything
        return f"10^{len(str(count)) - 1} B"
    for power, unit in ((50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if count >= 1 << power:  # integers throughout: an absurd size may not fit in a float
            return f"{(count >> (power - 10)) / 1024:.1f} {unit}"
    return f"{count} B"


def value_problems(config: FoxhuntConfig) -> list[tuple[str, str]]:
    """``(key, reason)`` for every combination of keys that cannot work (the machine does not matter)."""
    problems: list[tuple[str, str]] = []
    c, env, train = config.learner, config.env, config.train
    if not c.v_min < c.v_max:
        problems.append(("learner.v_min", f"{c.v_min!r} must be below learner.v_max = {c.v_max!r} (the C51 support)"))
    if not math.isfinite(c.v_min) or not math.isfinite(c.v_max):
        problems.append(("learner.v_min", f"the support [{c.v_min!r}, {c.v_max!r}] must be finite"))
    if not env.initial_cash <= MAX_INITIAL_CASH:  # also refuses infinity (NaN and <= 0 are the validator's)
        problems.append(("env.initial_cash", f"{env.initial_cash!r} must be at most {MAX_INITIAL_CASH:.0e}: money is "
                                             "float64 in backtests (whole units exact only up to 9.0e15) and float32 "
                                             "in training"))
    if env.reward_scale is not None and not math.isfinite(env.reward_scale):
        problems.append(("env.reward_scale", f"{env.reward_scale!r} must be finite (every reward would be 0)"))
    if c.lr_schedule == "cosine" and c.lr_min > c.lr:
        problems.append(("learner.lr_min", f"{c.lr_min!r} is above learner.lr = {c.lr!r}; the cosine schedule "
                                           "anneals from lr down to lr_min"))
    if c.n_step > env.episode_bars:
        problems.append(("learner.n_step", f"{c.n_step} is longer than an episode (env.episode_bars = "
                                           f"{env.episode_bars}); use at most {env.episode_bars}"))
    rows = c.replay.capacity // env.n_envs
    if rows == 0:
        problems.append(("learner.replay.capacity", f"{c.replay.capacity} holds less than one step of env.n_envs = "
                                                    f"{env.n_envs} environments; raise it to at least "
                                                    f"{env.n_envs * (c.n_step + 1)} (n_envs × (n_step + 1))"))
    elif rows < c.n_step + 1:
        problems.append(("learner.n_step", f"{c.n_step} needs n_step + 1 = {c.n_step + 1} steps of each environment "
                                           f"in replay, which holds learner.replay.capacity // env.n_envs = "
                                           f"{c.replay.capacity} // {env.n_envs} = {rows}; raise the capacity or "
                                           "lower n_step"))
    # as TrainConfig.plan lays an epoch out, in integers (a config may hold integers too large for a float)
    vector_steps = max(1, -(-train.env_steps_per_epoch // env.n_envs))
    fold_vector_steps = train.epochs * vector_steps
    if train.updates_per_epoch == 0:
        problems.append(("train.updates_per_epoch", "0: the run would collect transitions but never make an update, "
                                                    "so it would never train; set at least 1"))
    elif (warmup_vector_steps := -(-train.warmup_env_steps // env.n_envs)) >= fold_vector_steps:
        most = (fold_vector_steps - 1) * env.n_envs
        rounded = warmup_vector_steps * env.n_envs
        shown = train.warmup_env_steps if rounded == train.warmup_env_steps else \
            f"{train.warmup_env_steps} (rounded up to whole vector steps: {rounded})"
        problems.append(("train.warmup_env_steps", f"{shown} is not below the "
                                                   f"{fold_vector_steps * env.n_envs} env steps a fold collects "
                                                   f"(train.epochs × train.env_steps_per_epoch = {train.epochs} × "
                                                   f"{train.env_steps_per_epoch}, in vector steps of env.n_envs = "
                                                   f"{env.n_envs}): the warm-up never ends, so no update would ever "
                                                   f"run and the run would never train; lower it to at most {most}, "
                                                   "or raise train.epochs or train.env_steps_per_epoch"))
    return problems


def machine_problems(config: FoxhuntConfig) -> list[tuple[str, str]]:
    """``(key, reason)`` for every value this machine cannot run: threads, device, memory."""
    problems: list[tuple[str, str]] = []
    cpus = usable_cpus()
    if config.run.threads > cpus:
        problems.append(("run.threads", f"{config.run.threads} is more than the {cpus} CPU core(s) this process may "
                                        f"use; use at most {cpus} (or 0 for torch's default)"))
    device = device_name(config.run.device)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            problems.append(("run.device", '"cuda", but torch sees no CUDA GPU; use "cpu" or "auto"'))
    limit = memory_limit(device)
    try:
        estimate = estimate_memory(config)  # its input width comes from the configured feature set
    except DataError as error:  # an unknown set or name: the same one-paragraph refusal as every other value
        key = "features.names" if config.features.names else "features.feature_set"
        return [*problems, (key, str(error))]
    if limit is not None and estimate.total > limit[0]:
        saved = {key: estimate.total - estimate_memory(halve(config)).total for key, halve in SIZE_KEYS.items()}
        key = max(saved, key=saved.__getitem__)
        problems.append((key, f"the run needs about {_size(estimate.total)} ({estimate.parts()}), more than the "
                              f"{_size(limit[0])} of {limit[1]}; {key} weighs most: lower it"))
    return problems


def check_config(config: FoxhuntConfig) -> FoxhuntConfig:
    """``config`` unchanged, or one :class:`ConfigError` listing every value that cannot work (key paths named),
    or the :class:`~foxhunt.errors.PluginError` of the plugins it selects (their settings tables included)."""
    problems = value_problems(config) + machine_problems(config)
    if problems:
        lines = "\n".join(f"  {key}: {reason}" for key, reason in problems)
        raise ConfigError(f"this configuration cannot run:\n{lines}")
    host = PluginHost(config.plugins).discover().declare()
    host.freeze()  # the plugins' own tables: PluginError naming each
    # a name no loaded plugin provides: the same one-paragraph refusal as every other value
    unknown = [(key, reason) for key, reason in (
        ("learner.combiner", unknown_combiner(host.gradient_combiners(config), config.learner.combiner)),
        ("learner.encoder", unknown_encoder(host.encoders(config), config.learner.encoder)),
    ) if reason is not None]
    if unknown:
        lines = "\n".join(f"  {key}: {reason}" for key, reason in unknown)
        raise ConfigError(f"this configuration cannot run:\n{lines}")
    return config
