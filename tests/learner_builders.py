"""Small learners and a frozen host with the five built-in losses.

Shared by tests/learner and tests/builtin_plugins/losses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import foxhunt.learner.declarations as learner_declarations
from foxhunt.actions import Branch, branch_sizes
from foxhunt.isv import ISV
from foxhunt.learner import Learner, LearnerConfig, ReplayConfig
from foxhunt.plugin.host import FrozenRegistries, PluginHost, PluginSelection
from foxhunt_plugins.losses import c51, cql, ensemble, iqn, mse

LOSS_MODULES = (c51, mse, cql, iqn, ensemble)
OBS_DIM = 6
N_ENVS = 3


def small_config(**changes: Any) -> LearnerConfig:
    base = {
        "hidden": (16, 16),
        "head_hidden": 8,
        "n_atoms": 11,
        "n_quantiles": 4,
        "n_target_quantiles": 5,
        "n_cos": 8,
        "ensemble_size": 3,
        "replay": ReplayConfig(capacity=300, anneal_steps=50),
        "batch_size": 32,
    }
    base.update(changes)
    return LearnerConfig(**base)


def frozen_host(extra: Sequence[tuple[Any, str]] = (), losses: Sequence[Any] = LOSS_MODULES,
                settings: dict[str, dict[str, Any]] | None = None) -> tuple[PluginHost, FrozenRegistries]:
    """The learner's declarations and ``losses`` (plus ``extra``); ``settings`` are ``[plugins.<name>]`` tables."""
    host = PluginHost(PluginSelection(settings=settings or {}))
    host.add_plugin(learner_declarations, "learner")
    for module in losses:
        host.add_plugin(module, module.NAME)
    for plugin, name in extra:
        host.add_plugin(plugin, name)
    host.declare()
    return host, host.freeze()


def fill_replay(learner: Learner, steps: int, seed: int = 0) -> None:
    """Random transitions with valid actions in every branch and occasional episode ends."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.tensor(branch_sizes())
    dtype = learner.dtype
    for _ in range(steps):
        obs = torch.randn(N_ENVS, OBS_DIM, generator=g, dtype=dtype)
        actions = (torch.rand(N_ENVS, len(Branch), generator=g) * sizes).long()
        rewards = torch.randn(N_ENVS, generator=g, dtype=dtype)
        next_obs = torch.randn(N_ENVS, OBS_DIM, generator=g, dtype=dtype)
        dones = (torch.rand(N_ENVS, generator=g) < 0.1).to(dtype)
        learner.replay.add(obs, actions, rewards, next_obs, dones)


def assert_resumes_identically(a: Learner, b: Learner, steps: int = 3) -> None:
    """``b`` loads ``a``'s state; the two then take ``steps`` updates each and end in equal state, tensor for
    tensor."""
    b.load_state_dict(a.state_dict())
    for _ in range(steps):
        a.step(32)
        b.step(32)
    for name, tensor in a.state_dict().items():
        assert torch.equal(tensor, b.state_dict()[name]), name


def update_arguments(learner: Learner, batch_size: int = 8) -> tuple[Any, torch.Tensor, torch.Tensor, Any]:
    """``(batch, support, taus, targets)`` of one update, as :meth:`Learner.update` prepares them: what the
    functional middle (``update_pieces.functional_gradients``) takes after the learner."""
    from foxhunt.learner.update_pieces import prepare_targets

    batch, support = learner.sample(batch_size), learner.update_support()
    taus = learner._taus(batch_size, learner.config.n_quantiles)
    return batch, support, taus, prepare_targets(learner, batch, support, taus)


def assert_update_middle_compiles(learner: Learner) -> None:
    """The update's functional middle (what ``[learner] compile`` compiles, ``fullgraph``) traces with the learner's
    components inside ``torch.func.vjp`` and gives the eager losses; a loss can trace alone and still break there."""
    from foxhunt.learner.update_pieces import functional_gradients

    arguments = update_arguments(learner)
    compiled = torch.compile(functional_gradients, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(learner, *arguments).losses, functional_gradients(learner, *arguments).losses)


def assert_weight_slot_scales_the_loss(learner: Learner, loss: Callable[[Any], torch.Tensor], inputs: Any,
                                       slot: str) -> None:
    """ISV slot ``slot`` (read at each call) scales ``loss(inputs)``: 0.5 halves it; 0 gives a zero loss and a zero
    gradient on every learner parameter."""
    full = float(loss(inputs).detach())
    inputs.slot(slot).fill_(0.5)
    assert float(loss(inputs).detach()) == pytest.approx(0.5 * full, rel=1e-12)
    inputs.slot(slot).fill_(0.0)
    zero = loss(inputs)
    assert float(zero.detach()) == 0.0
    grads = torch.autograd.grad(zero, learner.params, allow_unused=True)
    assert all(grad is None or not grad.any() for grad in grads)


class Kit:
    """The builders above, handed to tests as a fixture (test modules never import a conftest by name)."""

    obs_dim = OBS_DIM
    n_envs = N_ENVS
    small_config = staticmethod(small_config)
    frozen_host = staticmethod(frozen_host)
    fill_replay = staticmethod(fill_replay)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit


@pytest.fixture(autouse=True)
def single_thread():
    """These networks are tiny: one intra-op thread is fastest, and immune to other processes on the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def make_learner() -> Callable[..., Learner]:
    def build(config: LearnerConfig | None = None, *, seed: int = 0, extra: Sequence[tuple[Any, str]] = (),
              losses: Sequence[Any] = LOSS_MODULES, dtype: torch.dtype = torch.float32, fill: int = 40,
              settings: dict[str, dict[str, Any]] | None = None, **changes: Any) -> Learner:
        """A small learner on CPU; ``changes`` edit :func:`small_config` when ``config`` is not given;
        ``settings`` are the loss plugins' ``[plugins.<name>]`` tables."""
        config = config or small_config(**changes)
        host, registries = frozen_host(extra, losses, settings)
        isv = ISV(registries.layout)
        learner = Learner(config, registries.layout, isv, host.loss_components(config), OBS_DIM, "cpu", seed,
                          n_envs=N_ENVS, dtype=dtype, combiners=host.gradient_combiners(config))
        learner.attach_state(registries.state)
        learner.registries = registries
        if fill:
            fill_replay(learner, fill)
        return learner

    return build
