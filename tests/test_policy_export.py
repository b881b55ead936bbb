"""Exported policies act exactly as ``foxhunt backtest`` does, in TorchScript and in ONNX, at any batch size."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from export_testkit import averaged_checkpoint, checkpoint  # noqa: F401 - fixtures
from trainer_testkit import _private_feature_cache  # noqa: F401 - a fixture

from foxhunt.actions import BRANCH_TABLES, Branch
from foxhunt.checkpoint_backtest import LoadedPolicy, load_policy
from foxhunt.env.tables import PortfolioObs
from foxhunt.errors import CheckpointError, FoxhuntError
from foxhunt.policy_export import METADATA_KEY, PORTFOLIO_FORMULAS, export_policy
from foxhunt.trainer.evaluation import greedy_policy

BATCH_SIZES = (1, 7, 256)  # the traced example has 3 rows: none of these may be fixed by it
Q_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def policy(checkpoint: Path) -> LoadedPolicy:  # noqa: F811 - the fixture imported above
    """The checkpoint loaded as `foxhunt backtest` loads it; trained, so its PopArt statistics have moved and the
    export has to carry them."""
    loaded = load_policy(checkpoint)
    loaded.host.close()
    assert not torch.equal(loaded.policy.popart.sigma, torch.ones(Branch.size()))
    return loaded


def batches(policy: LoadedPolicy, inputs: str, seed: int) -> list[tuple[tuple[torch.Tensor, ...], torch.Tensor]]:
    """Per batch size: the model's inputs, and the observation the backtest's policy sees for them.

    Raw features are drawn wide (several standard deviations) so that the normaliser's clip is exercised.
    """
    generator = torch.Generator().manual_seed(seed)
    n_features = len(policy.feature_set.names)
    out = []
    for size in BATCH_SIZES:
        portfolio = torch.randn(size, PortfolioObs.size(), generator=generator)
        if inputs == "raw":
            scale = torch.tensor(policy.policy.normalizer.std) * 20.0
            noise = torch.randn(size, n_features, generator=generator, dtype=torch.float64)
            raw = (torch.tensor(policy.policy.normalizer.mean) + scale * noise).to(torch.float32)  # as FeatureMatrix holds them
            observation = torch.cat([torch.from_numpy(policy.policy.normalizer.apply(raw.numpy())), portfolio], dim=1)
            out.append(((raw, portfolio), observation))
        else:
            observation = torch.cat([torch.randn(size, n_features, generator=generator) * 3.0, portfolio], dim=1)
            out.append(((observation,), observation))
    return out


def assert_acts_as_the_backtest(run_model: Callable[..., tuple[np.ndarray, np.ndarray]], policy: LoadedPolicy,
                                inputs: str) -> None:
    act = greedy_policy(policy.policy.act_values)
    for seed in (1, 2):
        for model_inputs, observation in batches(policy, inputs, seed):
            actions, q_values = (torch.as_tensor(out) for out in run_model(*model_inputs))
            expected_q = policy.policy.act_values(observation)
            assert actions.dtype == torch.int64 and q_values.dtype == torch.float32
            assert actions.shape == (observation.shape[0], Branch.size())
            assert q_values.shape == expected_q.shape
            assert torch.equal(actions, act(observation))
            real = torch.isfinite(expected_q)
            assert torch.equal(torch.isfinite(q_values), real)  # padded sub-actions: -inf in both
            assert torch.all(q_values[~real] == -torch.inf)
            torch.testing.assert_close(q_values[real], expected_q[real], rtol=0.0, atol=Q_TOLERANCE)


@pytest.mark.parametrize("inputs", ["observation", "raw"])
def test_torchscript_export_acts_as_the_backtest(checkpoint: Path, policy: LoadedPolicy, tmp_path: Path,  # noqa: F811
                                                 inputs: str) -> None:
    model_path, metadata_path = export_policy(checkpoint, "torchscript", tmp_path / "policy.pt", inputs)
    extra = {f"{METADATA_KEY}.json": ""}
    model = torch.jit.load(str(model_path), _extra_files=extra)
    assert json.loads(extra[f"{METADATA_KEY}.json"]) == json.loads(metadata_path.read_text(encoding="utf-8"))
    assert_acts_as_the_backtest(lambda *x: model(*x), policy, inputs)


@pytest.mark.parametrize("inputs", ["observation", "raw"])
def test_onnx_export_acts_as_the_backtest_in_onnxruntime(checkpoint: Path, policy: LoadedPolicy, tmp_path: Path,  # noqa: F811
                                                         inputs: str) -> None:
    model_path, metadata_path = export_policy(checkpoint, "onnx", tmp_path / "policy.onnx", inputs)
    session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
    embedded = {p.key: p.value for p in onnx.load(str(model_path)).metadata_props}
    assert json.loads(embedded[METADATA_KEY]) == metadata
    assert [i.name for i in session.get_inputs()] == [spec["name"] for spec in metadata["inputs"]]
    assert [o.name for o in session.get_outputs()] == ["actions", "q_values"]
    assert all(i.shape[0] == "batch" for i in session.get_inputs())  # a named, free batch axis
    names = [i.name for i in session.get_inputs()]
    assert_acts_as_the_backtest(lambda *x: session.run(None, {n: t.numpy() for n, t in zip(names, x, strict=True)}),
                                policy, inputs)


def test_metadata_names_the_input_columns_branches_and_sub_actions(checkpoint: Path, policy: LoadedPolicy,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    export_policy(checkpoint, "torchscript", tmp_path / "obs.pt")
    export_policy(checkpoint, "torchscript", tmp_path / "raw.pt", "raw")
    meta = json.loads((tmp_path / "obs.pt.json").read_text(encoding="utf-8"))
    features = list(policy.feature_set.names)
    portfolio = list(PortfolioObs.names())
    assert meta["observation"]["width"] == len(features) + PortfolioObs.size()
    assert meta["observation"]["columns"] == features + [f"portfolio.{name}" for name in portfolio]
    assert meta["inputs"] == [{"name": "observation", "dtype": "float32", "shape": ["batch", len(features) + len(portfolio)]}]
    assert list(meta["portfolio"]["fields"]) == portfolio == list(PORTFOLIO_FORMULAS)
    assert meta["branches"] == [{"name": b.name, "actions": list(BRANCH_TABLES[b].names())} for b in Branch]
    assert meta["branches"][Branch.DIRECTION]["actions"] == ["SHORT", "HOLD", "LONG", "FLAT"]
    assert meta["outputs"][0] == {"name": "actions", "dtype": "int64", "shape": ["batch", Branch.size()]}
    assert meta["features"]["names"] == features
    assert meta["features"]["normalizer"]["clip"] == policy.policy.normalizer.clip
    raw_meta = json.loads((tmp_path / "raw.pt.json").read_text(encoding="utf-8"))
    assert raw_meta["inputs"] == [{"name": "features", "dtype": "float32", "shape": ["batch", len(features)]},
                                  {"name": "portfolio", "dtype": "float32", "shape": ["batch", len(portfolio)]}]


def test_the_documented_normalisation_recipe_gives_the_raw_models_answer(checkpoint: Path, policy: LoadedPolicy,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    """A user with only the metadata normalises raw features for the observation model: same actions as the raw model."""
    observation_model = torch.jit.load(str(export_policy(checkpoint, "torchscript", tmp_path / "obs.pt")[0]))
    raw_model = torch.jit.load(str(export_policy(checkpoint, "torchscript", tmp_path / "raw.pt", "raw")[0]))
    norm = json.loads((tmp_path / "obs.pt.json").read_text(encoding="utf-8"))["features"]["normalizer"]
    for (raw, portfolio), _ in batches(policy, "raw", seed=3):
        mean, std = np.array(norm["mean"]), np.array(norm["std"])
        features = np.clip((raw.numpy() - mean) / std, -norm["clip"], norm["clip"]).astype(np.float32)
        actions, q_values = observation_model(torch.cat([torch.from_numpy(features), portfolio], dim=1))
        raw_actions, raw_q = raw_model(raw, portfolio)
        assert torch.equal(actions, raw_actions)
        assert torch.equal(q_values, raw_q)


def test_refusals_are_one_paragraph_and_write_nothing(checkpoint: Path, tmp_path: Path) -> None:  # noqa: F811
    cases = [
        (lambda: export_policy(tmp_path / "missing", "onnx", tmp_path / "a.onnx"), CheckpointError, "no checkpoint metadata here"),
        (lambda: export_policy(checkpoint, "tflite", tmp_path / "a.tflite"), FoxhuntError, "must be one of torchscript, onnx, got 'tflite'"),
        (lambda: export_policy(checkpoint, "onnx", tmp_path / "a.onnx", "pixels"), FoxhuntError, "must be one of observation, raw"),
        (lambda: export_policy(checkpoint, "onnx", tmp_path / "no" / "a.onnx"), FoxhuntError, "does not exist"),
        (lambda: export_policy(checkpoint, "onnx", tmp_path), FoxhuntError, "is a folder"),
    ]
    for call, kind, says in cases:
        with pytest.raises(kind, match=says) as caught:
            call()
        assert "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_onnx_without_the_export_extra_says_how_to_install_it(checkpoint: Path, tmp_path: Path,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as if it were not installed
    with pytest.raises(FoxhuntError, match=r"onnxscript is not installed.*pip install 'foxhunt\[export\]'"):
        export_policy(checkpoint, "onnx", tmp_path / "a.onnx")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("export_format", ["torchscript", "onnx"])
def test_a_policy_averaging_two_epochs_exports_their_average(averaged_checkpoint: Path, tmp_path: Path,  # noqa: F811
                                                             export_format: str) -> None:
    averaged = load_policy(averaged_checkpoint)
    averaged.host.close()
    assert len(averaged.policy.members) == 1
    model_path, _ = export_policy(averaged_checkpoint, export_format, tmp_path / f"policy.{export_format}", "observation")
    if export_format == "torchscript":
        model = torch.jit.load(str(model_path))
        assert_acts_as_the_backtest(lambda *x: model(*x), averaged, "observation")
    else:
        session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        assert_acts_as_the_backtest(lambda x: session.run(None, {name: x.numpy()}), averaged, "observation")
