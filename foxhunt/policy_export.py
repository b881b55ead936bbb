"""``foxhunt export``: a fold checkpoint's greedy policy as a TorchScript or ONNX file, usable without foxhunt.

The exported model is the acting path of ``foxhunt backtest`` (:meth:`Policy.act_values
<foxhunt.policy.Policy.act_values>`, then the argmax of each branch) with the checkpoint's constants folded
in: the network, the atom support read from its ISV and its PopArt statistics. It maps a batch to

- ``actions``: int64 ``[B, Branch]``, the greedy sub-action of every branch;
- ``q_values``: float32 ``[B, Branch, A]``, the expected Q of every sub-action in return units (padded
  sub-actions of a branch with fewer than ``A`` are ``-inf``, so they never win the argmax).

Two input layouts (``inputs``):

- ``"observation"``: one float32 ``[B, features + PortfolioObs]`` observation, the row the policy saw in
  training: the normalised market features followed by the portfolio features;
- ``"raw"``: the checkpoint's feature normaliser is part of the model. ``features`` float32 ``[B, features]``
  are the raw values of the checkpoint's feature set (as :class:`~foxhunt.features.FeatureMatrix` holds them),
  normalised inside as :class:`~foxhunt.features.Normalizer` does (in float64, clipped, then float32);
  ``portfolio`` float32 ``[B, PortfolioObs]`` follows them unchanged.

A checkpoint trained with an encoder window of W > 1 bars (``[learner] encoder``) takes the encoder input
instead: ``observation`` ``[B, W × features + PortfolioObs]`` (the normalised features of bars t-W+1 .. t,
oldest first, then the portfolio at t), or raw ``features`` ``[B, W, features]``; the metadata's ``encoder``
says which encoder and how many bars.

Every export writes a metadata JSON beside the model (``<output>.json``) and embeds the same text in the file
(the TorchScript extra file ``foxhunt.json``; the ONNX metadata property ``foxhunt``): the input layout with
the feature names, the portfolio fields and the normaliser's statistics, the branch and sub-action names.
docs/export.md shows how to build an input and read the outputs.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from foxhunt import __version__, durable
from foxhunt.actions import BRANCH_TABLES, Branch
from foxhunt.checkpoint_backtest import LoadedPolicy, load_policy
from foxhunt.env.tables import PortfolioObs
from foxhunt.errors import FoxhuntError
from foxhunt.learner.conviction import acting_q
from foxhunt.learner.network import BranchingNetwork
from foxhunt.policy import Policy

__all__ = [
    "EXPORT_FORMATS", "EXPORT_INPUTS", "METADATA_KEY", "PORTFOLIO_FORMULAS", "GreedyPolicy", "RawInputPolicy", "export_policy",
    "export_metadata", "policy_module", "default_output",
]

EXPORT_FORMATS = {"torchscript": ".pt", "onnx": ".onnx"}  # format -> file suffix of its default output
EXPORT_INPUTS = ("observation", "raw")
METADATA_KEY = "foxhunt"  # the ONNX metadata property; the TorchScript extra file is METADATA_KEY + ".json"
# How the environment writes each portfolio field of an observation (foxhunt.env.physics.write_observation),
# for a user who builds observations outside foxhunt; the scales are in the metadata beside them.
PORTFOLIO_FORMULAS = {
    "POSITION": "signed contracts held / max_contracts",
    "CAP": "position cap in contracts for the next decision / max_contracts",
    "UNREALISED_PNL": "open position's P&L at the bar's close, in money / reward_scale",
    "DRAWDOWN": "(peak equity - equity) / peak equity, this episode",
    "EPISODE_RETURN": "equity / initial_cash - 1",
    "BARS_IN_POSITION": "bars since the open position was opened / episode_bars (0 when flat)",
    "EPISODE_PROGRESS": "bars since the episode started / episode_bars",
}
_EXAMPLE_BATCH = 3  # the batch size the model is traced with; the batch axis stays dynamic
_OPSET = 18


class GreedyPolicy(nn.Module):
    """``observation`` float32 ``[B, obs]`` -> ``(actions int64 [B, Branch], q_values float32 [B, Branch, A])``.

    ``support [Branch, N]`` and the PopArt statistics ``mu``, ``sigma [Branch]`` are the checkpoint's, fixed;
    ``conviction_floor`` and ``conviction_spread`` the saved ``[learner]`` margins (0: off), applied as the
    backtest applies them. ``members``: a policy that averages several epochs (:attr:`Policy.members
    <foxhunt.policy.Policy.members>`) exports each other epoch as a GreedyPolicy of its own, and the q values
    are the mean over this one's and theirs, as :meth:`Policy.act_values` computes them.
    """

    def __init__(self, network: BranchingNetwork, support: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor,
                 conviction_floor: float = 0.0, conviction_spread: float = 0.0,
                 members: Sequence[GreedyPolicy] = ()) -> None:
        super().__init__()
        self.network = network
        self.members = nn.ModuleList(members)
        self.conviction_floor = float(conviction_floor)
        self.conviction_spread = float(conviction_spread)
        self.register_buffer("support", support.detach().clone())
        self.register_buffer("mu", mu.detach().clone())
        self.register_buffer("sigma", sigma.detach().clone())

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = self.q_values(observation)
        if len(self.members):  # fixed for the export: a policy of one epoch has the graph it always had
            q = torch.stack([q, *(member.q_values(observation) for member in self.members)]).mean(dim=0)
        return q.argmax(-1), q

    def q_values(self, observation: torch.Tensor) -> torch.Tensor:
        """This network's expected action values in return units, ``[B, Branch, A]``."""
        # constants of the export: at 0 the graph is the one without them
        q = acting_q(self.network, observation, self.support, self.conviction_floor, self.conviction_spread)
        return q * self.sigma[None, :, None] + self.mu[None, :, None]


class RawInputPolicy(nn.Module):
    """:class:`GreedyPolicy` behind the feature normaliser: ``(features float32 [B, F], portfolio float32
    [B, PortfolioObs])`` -> the same two outputs."""

    def __init__(self, policy: GreedyPolicy, mean: torch.Tensor, std: torch.Tensor, clip: float | None) -> None:
        super().__init__()
        self.policy = policy
        self.register_buffer("mean", mean.detach().to(torch.float64).clone())
        self.register_buffer("std", std.detach().to(torch.float64).clone())
        self.clip = clip

    def forward(self, features: torch.Tensor, portfolio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        normalised = (features.to(torch.float64) - self.mean) / self.std  # [B, F], or [B, W, F] for a window
        if self.clip is not None:
            normalised = normalised.clamp(-self.clip, self.clip)
        rows = normalised.reshape(normalised.shape[0], -1)  # a window's rows end to end, oldest first
        return self.policy(torch.cat([rows.to(torch.float32), portfolio.to(torch.float32)], dim=1))


def policy_module(loaded: LoadedPolicy, inputs: str = "observation") -> nn.Module:
    """The exportable module of a loaded checkpoint (loaded on the CPU; eval mode, no gradients).

    It holds the policy's own network, not a copy: load a policy for export only.
    """
    policy = loaded.policy

    def greedy_of(one: Policy, members: Sequence[GreedyPolicy] = ()) -> GreedyPolicy:
        return GreedyPolicy(one.network, one.support(), one.popart.mu, one.popart.sigma, one.config.conviction_floor,
                            one.config.conviction_spread, members)

    with torch.no_grad():
        greedy = greedy_of(policy, [greedy_of(member) for member in policy.members])
    module: nn.Module = greedy
    if inputs == "raw":
        normalizer = policy.normalizer
        module = RawInputPolicy(greedy, torch.from_numpy(normalizer.mean.copy()), torch.from_numpy(normalizer.std.copy()),
                                normalizer.clip)
    module.eval()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module


def _input_specs(policy: LoadedPolicy, inputs: str) -> list[dict[str, Any]]:
    n_features, window = len(policy.feature_set.names), policy.policy.window
    if inputs == "raw":
        rows = ["batch", n_features] if window == 1 else ["batch", window, n_features]
        return [{"name": "features", "dtype": "float32", "shape": rows},
                {"name": "portfolio", "dtype": "float32", "shape": ["batch", PortfolioObs.size()]}]
    return [{"name": "observation", "dtype": "float32",
             "shape": ["batch", window * n_features + PortfolioObs.size()]}]


def _window_columns(names: list[str], window: int) -> list[str]:
    """The market columns of the encoder input: every feature of bar t-W+1, ..., then of bar t (one bar: the names)."""
    if window == 1:
        return names
    return [f"bar[t-{lag}].{name}" if lag else f"bar[t].{name}" for lag in range(window - 1, -1, -1) for name in names]


def export_metadata(policy: LoadedPolicy, checkpoint: Path, export_format: str, inputs: str) -> dict[str, Any]:
    """What a user outside foxhunt needs to build an input and read the outputs (written as JSON)."""
    network = policy.policy.network
    normalizer = policy.policy.normalizer
    env = policy.config.env
    names = list(policy.feature_set.names)
    portfolio = list(PortfolioObs.names())
    window = policy.policy.window
    market = _window_columns(names, window)
    return {
        "foxhunt_version": __version__,
        "checkpoint": str(checkpoint),
        "format": export_format,
        "input_layout": inputs,
        "inputs": _input_specs(policy, inputs),
        "outputs": [
            {"name": "actions", "dtype": "int64", "shape": ["batch", network.n_branches]},
            {"name": "q_values", "dtype": "float32", "shape": ["batch", network.n_branches, network.n_actions],
             "padded": "-inf where the sub-action index is past its branch's sub-actions"},
        ],
        "encoder": {
            "name": policy.policy.encoder.name,
            "window": window,
            "rows": "the features of bars t-W+1 .. t, oldest first (a bar before the data's first repeats it), "
                    "then the portfolio at t",
        },
        "observation": {
            "width": len(market) + len(portfolio),
            "columns": [*market, *(f"portfolio.{name}" for name in portfolio)],
            "normalised_features": f"columns 0..{len(market) - 1}: clip((raw - mean) / std, -clip, clip) as float32",
            "portfolio_fields": portfolio,
        },
        "portfolio": {
            "fields": {name: PORTFOLIO_FORMULAS[name] for name in portfolio},
            "max_contracts": env.max_contracts,
            "episode_bars": env.episode_bars,
            "initial_cash": env.initial_cash,
            "reward_scale": env.resolved_reward_scale,
        },
        "features": {
            "set": policy.feature_set.name,
            "version": policy.feature_set.version,
            "names": names,
            "warmup_bars": policy.record.feature_set.warmup,
            "normalizer": {"mean": normalizer.mean.tolist(), "std": normalizer.std.tolist(), "clip": normalizer.clip},
        },
        "branches": [{"name": branch.name, "actions": list(BRANCH_TABLES[branch].names())} for branch in Branch],
        "data_source": policy.config.data.source,
    }


def _example(policy: LoadedPolicy, inputs: str) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    n_features, window = len(policy.feature_set.names), policy.policy.window
    if inputs == "raw":
        rows = (n_features,) if window == 1 else (window, n_features)
        return (torch.randn(_EXAMPLE_BATCH, *rows, generator=generator),
                torch.randn(_EXAMPLE_BATCH, PortfolioObs.size(), generator=generator))
    return (torch.randn(_EXAMPLE_BATCH, window * n_features + PortfolioObs.size(), generator=generator),)


def _torchscript_bytes(module: nn.Module, example: tuple[torch.Tensor, ...], metadata_text: str) -> bytes:
    traced = torch.jit.trace(module, example, check_trace=False)
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer, _extra_files={f"{METADATA_KEY}.json": metadata_text})
    return buffer.getvalue()


def _require_onnx_exporter() -> None:
    """torch's ONNX exporter needs onnx and onnxscript (the ``export`` extra): refused before anything is loaded."""
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as error:
        raise FoxhuntError(
            f"ONNX export needs the packages onnx and onnxscript ({error.name} is not installed); install them "
            "with `pip install 'foxhunt[export]'`, or export with --format torchscript"
        ) from None


def _onnx_bytes(module: nn.Module, example: tuple[torch.Tensor, ...], input_names: list[str], metadata_text: str) -> bytes:
    batch = torch.export.Dim("batch", min=1)
    with warnings.catch_warnings():  # notices about the exporter itself, not about this model
        warnings.simplefilter("ignore", FutureWarning)
        # the inputs of a raw export share the one batch axis, which is named "batch" all the same
        warnings.filterwarnings("ignore", message=r".*axis name: batch will not be used", category=UserWarning)
        program = torch.onnx.export(
            module, example, dynamo=True, input_names=input_names, output_names=["actions", "q_values"],
            dynamic_shapes=tuple({0: batch} for _ in example), opset_version=_OPSET, verbose=False,
        )
    proto = program.model_proto
    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, metadata_text
    return proto.SerializeToString()


def default_output(checkpoint: Path, export_format: str) -> Path:
    """``<checkpoint folder name><suffix>`` in the current folder, e.g. ``fold_0.onnx``."""
    return Path(f"{Path(checkpoint).resolve().name}{EXPORT_FORMATS[export_format]}")


def export_policy(checkpoint: Path, export_format: str, output: Path | None = None,
                  inputs: str = "observation") -> tuple[Path, Path]:
    """Export fold checkpoint ``checkpoint``'s greedy policy; returns the model's path and its metadata JSON's.

    ``export_format`` is "torchscript" or "onnx"; ``inputs`` "observation" (a normalised observation) or "raw"
    (raw features and the portfolio fields, the normaliser inside). ``output`` defaults to
    :func:`default_output`; the metadata goes to ``<output>.json``. The checkpoint is verified as
    ``foxhunt backtest`` verifies it (layout, plugin set, integrity) before anything is written.
    """
    if export_format not in EXPORT_FORMATS:
        raise FoxhuntError(f"export format must be one of {', '.join(EXPORT_FORMATS)}, got {export_format!r}")
    if inputs not in EXPORT_INPUTS:
        raise FoxhuntError(f"export inputs must be one of {', '.join(EXPORT_INPUTS)}, got {inputs!r}")
    checkpoint = Path(checkpoint)
    output = Path(output) if output is not None else default_output(checkpoint, export_format)
    if output.is_dir():
        raise FoxhuntError(f"{output}: is a folder; pass the file to write with --output, e.g. {output / default_output(checkpoint, export_format)}")
    if not output.parent.is_dir():
        raise FoxhuntError(f"{output}: its folder {output.parent} does not exist; create it or pass another --output")
    if export_format == "onnx":
        _require_onnx_exporter()
    policy = load_policy(checkpoint, "cpu")
    try:
        module = policy_module(policy, inputs)
        metadata = export_metadata(policy, checkpoint, export_format, inputs)
    finally:
        policy.host.close()
    text = json.dumps(metadata, indent=2, allow_nan=True)
    example = _example(policy, inputs)
    with torch.no_grad():
        if export_format == "torchscript":
            payload = _torchscript_bytes(module, example, text)
        else:
            payload = _onnx_bytes(module, example, [spec["name"] for spec in metadata["inputs"]], text)
    sidecar = output.with_name(output.name + ".json")
    durable.write_bytes(output, payload)
    durable.write_text(sidecar, text + "\n")
    return output, sidecar
