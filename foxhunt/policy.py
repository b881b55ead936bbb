"""A trained greedy policy: network, PopArt statistics and atom support → the greedy action of every branch.

A fold checkpoint (``checkpoints/fold_K``) is one saved :class:`Policy`, and
:meth:`Policy.save` / :meth:`Policy.load` are each other's inverse: what one
writes, the other reads, and a loaded policy saved again gives the same files.
The tensors are the network, its spectral-norm vectors and PopArt statistics
(named ``learner.*``, as when the learner wrote them, so checkpoints saved
before this class existed still load), the ISV (the atom support is read from
its slots) and the fold's feature normaliser; the metadata is the run's
provenance (config, plugins, data, feature set, fold windows, validation).

Acting is the learner's acting path (:meth:`Learner.act_values
<foxhunt.learner.Learner.act_values>`) with the same operations in the same
order, so a saved policy gives bit for bit the actions the run measured.
The trainer tests each fold with its saved policy, ``foxhunt backtest`` and
``foxhunt export`` load one (through :func:`foxhunt.checkpoint_backtest.load_policy`,
which first checks the plugin set the layout comes from).

A policy may average several epochs of its fold (``[train] policy_epochs``,
:mod:`foxhunt.trainer.snapshots`): it is then the fold's best epoch with the
others as :attr:`Policy.members`, and acts on the mean of their expected action
values. The file holds each member's network, spectral-norm vectors, PopArt
statistics and ISV under ``member{i}.``; the metadata's ``members`` lists their
epochs and validation figures, best first.

A policy acts through the encoder it was trained with (``[learner] encoder``):
the metadata records its name and window (``encoder``), and :meth:`Policy.load`
refuses a checkpoint whose encoder no loaded plugin provides, or provides with
another window. With a window W > 1 it gathers the bars before each
observation's from the feature matrix given to :meth:`Policy.use_features`, as
the learner does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from foxhunt.actions import Branch
from foxhunt.checkpoint import TENSORS_FILE, load_checkpoint, save_checkpoint
from foxhunt.checkpoint_fields import PolicyRecord, expect_tensors, naming_the_file, read_policy_record
from foxhunt.config import FoxhuntConfig
from foxhunt.config_loading import deep_copy, structure
from foxhunt.env.tables import PortfolioObs
from foxhunt.errors import CheckpointError, ConfigError
from foxhunt.features import Normalizer
from foxhunt.isv import ISV, IsvLayout
from foxhunt.learner import (MLP_ENCODER, BranchingNetwork, Learner, LearnerConfig, LearnerReads, PopArt,
                             SpectralNorm, learner_config_of, popart_of, support_atoms, window_input)
from foxhunt.learner.atoms import AtomShape
from foxhunt.learner.conviction import acting_q
from foxhunt.learner.context import IsvContext
from foxhunt.learner.encoders import unknown_encoder
from foxhunt.learner.network import build_network
from foxhunt.plugin.settings import migrate_saved
from foxhunt.plugin.records import Encoder
from foxhunt.state_loading import load_in_place

__all__ = ["Policy", "POLICY_KIND", "MEMBERS_KEY", "refuse_other_kind", "saved_config", "saved_encoder"]

POLICY_KIND = "policy"  # metadata "kind" of a fold checkpoint
# The tensors' names in the file: the learner wrote policy checkpoints before this class did.
_TENSOR_PREFIX = "learner."
_HINT = "the checkpoint was made with another network shape or precision"
# The precision runs train in (the learner's default): a checkpoint of another one is refused by the dtype check.
_DTYPE = torch.float32
# Written by save_checkpoint from the layout and the bytes: never part of the policy's own metadata.
_SEALED_KEYS = ("isv", "integrity")
MEMBERS_KEY = "members"  # metadata: [{"epoch": E, "validation": {...}}] of the member epochs after the best, in order
ENCODER_KEY = "encoder"  # metadata: {"name": ..., "window": W}; absent in checkpoints made before encoders (mlp, 1)


def refuse_other_kind(metadata: Mapping[str, Any], path: Path) -> None:
    """Refuse a checkpoint that is not a fold's policy (the resume checkpoint, most likely)."""
    if metadata.get("kind") != POLICY_KIND:
        raise CheckpointError(f"{path}: this is a {metadata.get('kind', 'unknown')!r} checkpoint; backtest and export "
                              "take a fold checkpoint (checkpoints/fold_K)")


def saved_config(record: PolicyRecord, source: str, plugins: Mapping[str, Any] | None = None) -> FoxhuntConfig:
    """The config a policy was trained with, with ``plugins`` (a ``[plugins]`` table) over its own."""
    saved = migrate_saved(record.config)  # saved before plugins owned their settings: moved to where they are now
    if plugins and isinstance(saved, dict) and isinstance(saved.get("plugins", {}), dict):
        saved = deep_copy(saved)  # the record's own dict stays as the file has it
        table = saved.setdefault("plugins", {})
        for key, value in plugins.items():  # a plugin's table merged key by key
            table[key] = {**table[key], **value} if isinstance(value, dict) and isinstance(table.get(key), dict) else value
    try:
        return structure(saved, FoxhuntConfig, source=f"{source} (saved config)")
    except ConfigError as error:  # the saved config is part of the checkpoint: a bad one is a bad checkpoint
        raise CheckpointError(f"{source}: the saved config is not valid ({error}); the checkpoint is damaged or altered") from None


def saved_encoder(metadata: Mapping[str, Any], config: LearnerConfig, encoders: Any, path: Path) -> Encoder:
    """The encoder a checkpoint was trained with, among ``encoders`` (the loaded plugins'): refused with a
    :class:`CheckpointError` when none of them has its name, or has it with another window."""
    saved = metadata.get(ENCODER_KEY, {"name": MLP_ENCODER.name, "window": MLP_ENCODER.window})
    if (not isinstance(saved, Mapping) or not isinstance(saved.get("name"), str)
            or isinstance(saved.get("window"), bool) or not isinstance(saved.get("window"), int)):
        raise CheckpointError(f"{path}: metadata {ENCODER_KEY!r} is {saved!r}, expected {{'name': str, 'window': int}}; "
                              "the checkpoint is damaged or altered")
    if saved["name"] != config.encoder:
        raise CheckpointError(f"{path}: metadata says encoder {saved['name']!r} but the saved config says "
                              f"{config.encoder!r}; the checkpoint is damaged or altered")
    reason = unknown_encoder(encoders, saved["name"])
    if reason is not None:
        raise CheckpointError(f"{path}: the policy was trained with encoder {saved['name']!r}, and {reason}")
    encoder = next(e for e in encoders if e.name == saved["name"])
    if encoder.window != saved["window"]:
        raise CheckpointError(f"{path}: the policy was trained with encoder {saved['name']!r} over {saved['window']} "
                              f"bars, but the loaded plugin's gives {encoder.window}; set that plugin's window back "
                              f"to {saved['window']} (or leave its settings as the checkpoint saved them)")
    return encoder


class Policy:
    """``act_values(obs, bars)`` → expected Q ``[N, Branch, A]`` in return units; ``greedy_actions`` → ``[N, Branch]``.

    ``isv`` supplies the atom support (its support slots, or ``config``'s ``v_min``/``v_max`` when the layout
    has none); ``normalizer`` maps raw features to the market part of an observation; ``metadata`` is the
    provenance :meth:`save` writes beside the tensors. ``encoder`` is the encoder record the network was built
    with, ``n_features`` the market part of an observation (for a window, ``bars`` and :meth:`use_features`).
    ``members``: the other epochs this policy averages (:meth:`averaging`), each a one-network policy of the same
    shapes with its own ISV; empty for a policy of one epoch.
    """

    def __init__(self, network: BranchingNetwork, spectral: SpectralNorm, popart: PopArt, isv: ISV,
                 config: LearnerConfig, normalizer: Normalizer, metadata: Mapping[str, Any],
                 encoder: Encoder = MLP_ENCODER, n_features: int = 0, members: tuple[Policy, ...] = ()) -> None:
        self.network, self.spectral, self.popart = network, spectral, popart
        self.members = tuple(members)
        self.encoder, self.window, self.n_features = encoder, encoder.window, n_features
        self.feature_matrix: torch.Tensor | None = None
        self.isv = isv
        self.config = config
        self.normalizer = normalizer
        self.metadata = {key: value for key, value in metadata.items() if key not in _SEALED_KEYS}
        self.dtype = popart.mu.dtype  # the learner builds its network and PopArt in one precision
        self.device = isv.tensor.device
        reads = LearnerReads.build(isv, config)
        self._center, self._half_width = reads.center, reads.half_width  # live views of the ISV
        self._atom_shape = AtomShape(config.n_atoms, config.atom_spacing, config.atom_spacing_mix, reads.knots,
                                     dtype=self.dtype, device=self.device)

    @classmethod
    def of_learner(cls, learner: Learner, normalizer: Normalizer, metadata: Mapping[str, Any]) -> Policy:
        """The learner's current greedy policy, sharing its live modules and ISV (not copies): save it, then
        let it go, since it changes as the learner trains."""
        policy = cls(learner.network, learner.spectral, learner.popart, learner.isv, learner.config, normalizer,
                     metadata, learner.encoder, learner.n_features)
        policy.feature_matrix = learner.feature_matrix
        return policy

    @classmethod
    def averaging(cls, ranked: Sequence[Policy]) -> Policy:
        """One policy acting on the mean expected action values of ``ranked`` (one-network policies of one fold,
        best first): the first with the rest as its members, their epochs and validation in its metadata."""
        if not ranked or any(policy.members for policy in ranked):
            raise ValueError("averaging() takes one or more one-network policies")
        best, *rest = ranked
        metadata = dict(best.metadata)
        metadata.pop(MEMBERS_KEY, None)
        if rest:
            metadata[MEMBERS_KEY] = [{"epoch": p.metadata["epoch"], "validation": p.metadata["validation"]} for p in rest]
        policy = cls(best.network, best.spectral, best.popart, best.isv, best.config, best.normalizer, metadata,
                     best.encoder, best.n_features, tuple(rest))
        policy.feature_matrix = best.feature_matrix
        return policy

    # -- acting ------------------------------------------------------------------------
    def support(self) -> torch.Tensor:
        """``[Branch, N]`` atoms, from the ISV's support slots (as :meth:`Learner.support` computes them)."""
        return support_atoms(self._center.to(self.dtype), self._half_width.to(self.dtype), self.config.n_atoms,
                             self._atom_shape())

    def use_features(self, features: torch.Tensor) -> None:
        """The normalised feature matrix ``[bars, F]`` on the policy's device that an encoder window is gathered
        from (the one the backtest's environment reads); unused for a one-bar encoder."""
        self.feature_matrix = features

    def encoder_input(self, obs: torch.Tensor, bars: torch.Tensor | None = None) -> torch.Tensor:
        """The network's input for observations ``obs [N, D]`` at bars ``bars [N]`` (``obs`` itself for W = 1)."""
        x = obs.to(self.dtype)
        if self.window == 1:
            return x
        if bars is None or self.feature_matrix is None:
            raise ValueError(f"encoder {self.encoder.name!r} reads {self.window} bars: acting needs each "
                             "observation's bar index, and use_features the normalised feature matrix")
        return window_input(x, bars, self.feature_matrix, self.window)

    @torch.no_grad()
    def act_values(self, obs: torch.Tensor, bars: torch.Tensor | None = None) -> torch.Tensor:
        """Expected Q per branch action, unnormalised: ``[N, Branch, A]``; padded actions are ``-inf``. With
        the saved ``[learner] conviction_floor`` and ``conviction_spread`` (:mod:`foxhunt.learner.conviction`), as
        the learner's acting values do; with members, the mean over this network's and theirs."""
        q = self._own_values(obs, bars)
        if not self.members:
            return q
        return torch.stack([q, *(member._own_values(obs, bars) for member in self.members)]).mean(dim=0)

    def _own_values(self, obs: torch.Tensor, bars: torch.Tensor | None) -> torch.Tensor:
        q = acting_q(self.network, self.encoder_input(obs, bars), self.support(), self.config.conviction_floor,
                     self.config.conviction_spread)
        return self.popart.unnormalize_q(q)

    def greedy_actions(self, obs: torch.Tensor, bars: torch.Tensor | None = None) -> torch.Tensor:
        """The argmax sub-action of every branch: ``[N, Branch]`` int64."""
        return self.act_values(obs, bars).argmax(dim=-1)

    # -- state -------------------------------------------------------------------------
    def _live(self) -> dict[str, torch.Tensor]:
        return {f"{prefix}.{name}": tensor
                for prefix, module in (("network", self.network), ("spectral", self.spectral), ("popart", self.popart))
                for name, tensor in module.state_dict(keep_vars=True).items()}

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The network, spectral-norm and PopArt tensors by name (copies); a member's are not among them."""
        return {name: tensor.detach().clone() for name, tensor in self._live().items()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Copy :meth:`state_dict` output in place; names, shapes and dtypes are checked before the first copy."""
        load_in_place(self._live(), state, "policy state", _HINT)

    # -- the fold checkpoint -----------------------------------------------------------
    def save(self, directory: Path) -> Path:
        """Write this policy as the checkpoint folder ``directory`` (replaced whole, atomically)."""
        tensors = {f"{_TENSOR_PREFIX}{name}": tensor for name, tensor in self.state_dict().items()}
        tensors["isv"] = self.isv.tensor
        tensors["normalizer.mean"] = torch.from_numpy(np.array(self.normalizer.mean, dtype=np.float64))
        tensors["normalizer.std"] = torch.from_numpy(np.array(self.normalizer.std, dtype=np.float64))
        for index, member in enumerate(self.members, start=1):
            tensors.update({f"{_member_prefix(index)}{_TENSOR_PREFIX}{name}": t for name, t in member.state_dict().items()})
            tensors[f"{_member_prefix(index)}isv"] = member.isv.tensor
        metadata = self.metadata | {"kind": POLICY_KIND, "normalizer_clip": self.normalizer.clip,
                                    ENCODER_KEY: {"name": self.encoder.name, "window": self.window}}
        return save_checkpoint(directory, tensors, metadata, self.isv.layout)

    @classmethod
    def load(cls, directory: Path, layout: IsvLayout, device: torch.device | str = "cpu",
             encoders: Any = (MLP_ENCODER,)) -> Policy:
        """Read the policy :meth:`save` wrote to ``directory``, onto ``device``.

        ``layout`` is the ISV layout of the plugins that will run beside it (invariant 4: it is compared with
        the saved one first, and another is refused with the slot diff); then the two SHA-256 hashes, the
        metadata keys and every tensor's name, shape and dtype are checked before anything is built.
        ``encoders`` are those the loaded plugins provide (``PluginHost.encoders``): the saved encoder must be
        among them with its saved window (:func:`saved_encoder`).
        """
        directory = Path(directory)
        tensor_path = directory / TENSORS_FILE
        tensors, metadata = load_checkpoint(directory, layout)
        refuse_other_kind(metadata, directory)
        record = read_policy_record(metadata, directory)
        config = learner_config_of(saved_config(record, str(directory)))
        encoder = saved_encoder(metadata, config, encoders, directory)
        n_features = len(record.feature_set.names)
        expect_tensors(tensors, {
            "isv": ISV(layout, "cpu").tensor,
            "normalizer.mean": torch.zeros(n_features, dtype=torch.float64),
            "normalizer.std": torch.zeros(n_features, dtype=torch.float64),
        }, tensor_path)
        isv = ISV(layout, device)
        isv.tensor.copy_(tensors["isv"])
        normalizer = Normalizer(mean=tensors["normalizer.mean"].numpy(), std=tensors["normalizer.std"].numpy(),
                                clip=record.normalizer_clip)
        # a run whose loss asked for a state-value head (the IQL value head) saved it with the network
        head = tensors.get(f"{_TENSOR_PREFIX}network.state_value_out.bias")
        # and a run with an auxiliary task saved the auxiliary head (acting never reads it)
        auxiliary = tensors.get(f"{_TENSOR_PREFIX}network.auxiliary_out.bias")
        widths = {"state_values": 0 if head is None else int(head.shape[-1]),
                  "auxiliary_outputs": 0 if auxiliary is None else int(auxiliary.shape[-1])}
        policies = []
        for index in range(_member_count(metadata, directory) + 1):
            prefix = _member_prefix(index) if index else ""
            if index:  # each member acts with the support of its own epoch's ISV
                expect_tensors(tensors, {f"{prefix}isv": ISV(layout, "cpu").tensor}, tensor_path)
                isv = ISV(layout, device)
                isv.tensor.copy_(tensors[f"{prefix}isv"])
            policy = cls._untrained(config, n_features, isv, normalizer, metadata, encoder, **widths)
            with naming_the_file(tensor_path):
                policy.load_state_dict({name.removeprefix(prefix + _TENSOR_PREFIX): tensor for name, tensor in tensors.items()
                                        if name.startswith(prefix + _TENSOR_PREFIX)})
            policies.append(policy)
        best, *members = policies
        best.members = tuple(members)
        return best

    @classmethod
    def _untrained(cls, config: LearnerConfig, n_features: int, isv: ISV, normalizer: Normalizer,
                   metadata: Mapping[str, Any], encoder: Encoder, *, state_values: int = 0,
                   auxiliary_outputs: int = 0) -> Policy:
        """Modules of the learner's shapes, to load into; built as the learner builds them.

        ``state_values``: the width of the state-value head the saved network has (0: none). Acting does not
        use it (the centre it gives is the same for every action of a branch), so no centre rule is needed.
        ``auxiliary_outputs``: the width of the saved auxiliary head (0: none), kept only so the file loads whole."""
        device = isv.tensor.device
        portfolio = PortfolioObs.size()
        # parameter init draws from the global RNG: forked, so loading a policy mid-run leaves the run's draws alone
        # the ISV context is read from the policy's own ISV, the one it was saved with: frozen with it
        context = IsvContext(isv.tensor, isv.layout, config.isv_context) if config.isv_context else None
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            network = build_network(config, encoder, n_features, portfolio, context, state_values=state_values,
                                    auxiliary_outputs=auxiliary_outputs).to(device, _DTYPE)
        generator = torch.Generator(device).manual_seed(0)  # the vectors' start values are overwritten by the load
        spectral = SpectralNorm(network.weight_matrices(), config.sigma_max, config.power_iterations, generator)
        popart = popart_of(config.popart_stats, len(Branch), network.n_actions, config.popart_beta,
                           config.popart_sigma_min, config.popart, device, _DTYPE)
        return cls(network, spectral, popart, isv, config, normalizer, metadata, encoder, n_features)


def _member_prefix(index: int) -> str:
    return f"member{index}."


def _member_count(metadata: Mapping[str, Any], path: Path) -> int:
    """How many members after the best a saved policy has (its metadata's ``members``; none when absent)."""
    members = metadata.get(MEMBERS_KEY, [])
    if not isinstance(members, list) or not all(
            isinstance(m, Mapping) and isinstance(m.get("epoch"), int) and isinstance(m.get("validation"), Mapping)
            for m in members):
        raise CheckpointError(f"{path}: metadata {MEMBERS_KEY!r} is {members!r}, expected a list of "
                              "{'epoch': int, 'validation': {...}}; the checkpoint is damaged or altered")
    return len(members)
