"""Plateau recovery (``[train.recovery]``): detection, the ring, shrink-and-perturb, Adam moment reset, the run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from learner_builders import make_learner  # noqa: F401 - a fixture
from trainer_testkit import TINY, TINY_DATA, StopAfter

from foxhunt.checkpoint import read_metadata
from foxhunt.config import load_config
from foxhunt.learner.optim import LRSchedule
from foxhunt.trainer.config import RecoveryConfig
from foxhunt.trainer.recovery import (
    CheckpointRing,
    PlateauDetector,
    PlateauRecovery,
    Snapshot,
    model_state,
    moment_parameters,
    reset_moments,
    shrink_perturb,
)
from foxhunt.trainer.report import build_report
from foxhunt.trainer.resume import RESUME_NAME
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer

# -- plateau detection against a simple reference ------------------------------------------------------------


def reference_plateaus(scores: list[float], metric: str, patience: int, min_delta: float) -> list[bool]:
    """First the epochs that set a record (finite, at least ``min_delta`` better than the last record, the first
    finite one always), then per epoch: on a plateau when the fold has had ``patience`` epochs and none of the last
    ``patience`` set one."""
    sign = -1.0 if metric == "max_drawdown" else 1.0
    records: list[int] = []
    for t, score in enumerate(scores):
        if math.isfinite(score) and (not records or sign * (score - scores[records[-1]]) >= min_delta):
            records.append(t)
    return [t + 1 >= patience and not any(t - patience < r <= t for r in records) for t in range(len(scores))]


@given(
    scores=st.lists(st.one_of(st.floats(-3.0, 3.0), st.just(math.nan)), min_size=1, max_size=30),
    patience=st.integers(1, 5),
    min_delta=st.floats(1e-3, 1.5),
    metric=st.sampled_from(["sharpe", "max_drawdown"]),
)
def test_plateau_detection_matches_the_reference(scores: list[float], patience: int, min_delta: float, metric: str) -> None:
    detector = PlateauDetector(metric, patience, min_delta)
    assert [detector.observe(score) for score in scores] == reference_plateaus(scores, metric, patience, min_delta)


def test_a_restart_counts_the_stale_epochs_again_from_zero() -> None:
    detector = PlateauDetector("sharpe", 2, 0.1)
    assert [detector.observe(s) for s in (1.0, 1.05, 1.0)] == [False, False, True]
    detector.restart()
    assert [detector.observe(s) for s in (1.09, 1.2)] == [False, False]  # 1.2 beats the kept best (1.0) by 0.2
    assert detector.best == 1.2


def test_the_ring_keeps_the_last_k_and_ranks_by_improvement_rate() -> None:
    ring = CheckpointRing(3)
    for epoch, rate in enumerate([None, 0.5, -0.1, 0.2, 0.2]):
        ring.push(Snapshot(epoch, 0.0, rate, {}))
    assert [s.epoch for s in ring.snapshots] == [2, 3, 4]
    assert ring.best().epoch == 4  # ties: the later epoch
    only_unknown = CheckpointRing(2)
    only_unknown.push(Snapshot(0, 1.0, None, {}))
    assert only_unknown.best().epoch == 0
    with pytest.raises(ValueError, match="empty"):
        CheckpointRing(1).best()


def test_recovery_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="unknown parameter group"):
        RecoveryConfig(reset_moments=("trunk", "tail"))
    with pytest.raises(ValueError):
        RecoveryConfig(shrink=1.5)
    with pytest.raises(ValueError):
        RecoveryConfig(min_delta=0.0)
    assert RecoveryConfig().enabled is False


# -- shrink and perturb --------------------------------------------------------------------------------------


@given(seed=st.integers(0, 2**31 - 1), shrink=st.floats(0.05, 1.0), noise=st.floats(0.0, 0.5))
def test_shrink_and_perturb_is_the_exact_formula(seed: int, shrink: float, noise: float) -> None:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    before = [p.detach().clone() for p in net.parameters()]
    generator = torch.Generator().manual_seed(seed)
    reference_draws = torch.Generator().manual_seed(seed)
    shrink_perturb(net.parameters(), shrink, noise, generator)
    for parameter, old in zip(net.parameters(), before, strict=True):
        xi = torch.randn(old.shape, generator=reference_draws, dtype=torch.float64)
        expected = shrink * old + noise * xi
        torch.testing.assert_close(parameter.detach(), expected, rtol=1e-14, atol=1e-14)
    assert torch.equal(generator.get_state(), reference_draws.get_state())  # one draw per element, in order


def test_shrink_and_perturb_reproduces_with_the_seed() -> None:
    def perturbed(seed: int) -> list[torch.Tensor]:
        torch.manual_seed(0)
        net = torch.nn.Linear(5, 3)
        shrink_perturb(net.parameters(), 0.7, 0.1, torch.Generator().manual_seed(seed))
        return [p.detach().clone() for p in net.parameters()]

    assert all(torch.equal(a, b) for a, b in zip(perturbed(4), perturbed(4), strict=True))
    assert not torch.equal(perturbed(4)[0], perturbed(5)[0])


# -- Adam moment reset ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("groups", [("trunk",), ("heads",), ("all",), ("trunk", "heads"), ()])
def test_momentum_reset_zeroes_exactly_the_chosen_groups(make_learner, groups: tuple[str, ...]) -> None:  # noqa: F811
    learner = make_learner(seed=1)
    for _ in range(3):
        learner.step(16)
    before = {id(p): {k: t.clone() for k, t in learner.optimizer.state[p].items()} for p in learner.optimized}
    chosen = moment_parameters(learner, groups)
    reset_moments(learner.optimizer, chosen.values())
    chosen_ids = {id(p) for p in chosen.values()}
    for p in learner.optimized:
        state = learner.optimizer.state[p]
        if id(p) in chosen_ids:
            assert all(not t.any() for t in state.values())
        else:
            assert all(torch.equal(t, before[id(p)][k]) for k, t in state.items())
            assert state["exp_avg_sq"].any()  # a state the updates did move: the comparison is not vacuous
    names = set(dict(learner.network.named_parameters()))
    trunk, heads = set(moment_parameters(learner, ("trunk",))), set(moment_parameters(learner, ("heads",)))
    assert trunk and heads and not trunk & heads and trunk | heads == names
    assert set(moment_parameters(learner, ("all",))) >= names


# -- the recovery on a learner -------------------------------------------------------------------------------


def test_recover_rewinds_to_the_fastest_improving_checkpoint_and_boosts(make_learner) -> None:  # noqa: F811
    learner = make_learner(seed=2, lr_schedule="constant")
    config = RecoveryConfig(enabled=True, ring_size=3, patience=2, min_delta=0.5, max_recoveries=1,
                            epsilon_boost=0.3, lr_multiplier=3.0, boost_epochs=2)
    recovery = PlateauRecovery(config, "sharpe", learner)
    snapshots = {}
    records = []
    for epoch, score in enumerate([0.0, 1.0, 1.2, 1.1]):
        learner.step(16)
        snapshots[epoch] = model_state(learner)
        records.append(recovery.observe(epoch, score))
    assert [r["pending"] for r in records] == [False, False, False, True]
    assert records[1]["improvement_rate"] == 1.0
    record = recovery.recover(3)
    assert (record["rewound_to"], record["number"], record["ring"]) == (1, 1, [1, 2, 3])
    for part in ("target", "popart"):  # rewound as saved (the online network is then perturbed and projected)
        for name, tensor in getattr(learner, part).state_dict().items():
            assert torch.equal(tensor, snapshots[1][part][name]), (part, name)
    assert not torch.equal(learner.network.trunk[0].weight, snapshots[3]["network"]["trunk.0.weight"])
    assert float(recovery.epsilon_boost) == pytest.approx(0.3)
    assert float(learner.schedule.lr) == pytest.approx(3.0 * learner.config.lr)
    epsilon = torch.tensor([0.1, 0.8, 0.0, 1.0])
    torch.testing.assert_close(recovery.epsilon(epsilon), torch.tensor([0.4, 1.0, 0.3, 1.0]))
    assert float(recovery.temperature(0.1)) == pytest.approx(0.1 * config.temperature_multiplier)
    assert all(not t.any() for p in learner.optimized for t in learner.optimizer.state[p].values())

    saved = json.loads(json.dumps(recovery.state()))  # the resume metadata is JSON
    again = PlateauRecovery(config, "sharpe", make_learner(seed=2, lr_schedule="constant"))
    again.load_state(saved)
    assert again.state() == recovery.state() and len(again.ring) == 0
    assert float(again.learner.schedule.lr) == pytest.approx(3.0 * learner.config.lr)  # the boost is on again
    skipped = [recovery.observe(epoch, 0.0) for epoch in (4, 5, 6)]
    assert float(recovery.epsilon_boost) == 0.0 and float(learner.schedule.lr) == pytest.approx(learner.config.lr)
    assert float(recovery.temperature(0.1)) == pytest.approx(0.1)
    assert skipped[-1]["plateau"] and not skipped[-1]["pending"] and "max_recoveries" in skipped[-1]["skipped"]


def test_non_finite_scores_are_stale_and_the_resume_state_stays_strict_json(make_learner) -> None:  # noqa: F811
    learner = make_learner(seed=3, fill=0)
    recovery = PlateauRecovery(RecoveryConfig(enabled=True, patience=2), "sortino", learner)
    records = [recovery.observe(epoch, score) for epoch, score in enumerate([math.nan, math.inf])]
    assert [r["stale_epochs"] for r in records] == [1, 2] and records[1]["pending"]
    assert all(r["improvement_rate"] is None for r in records)
    record = recovery.recover(1)
    assert record["rewound_to"] == 1 and record["rewound_rate"] is None  # no rate known: the later epoch
    json.dumps(recovery.state(), allow_nan=False)  # checkpoint metadata has no NaN to write


def test_the_lr_scale_holds_under_the_cosine_schedule_and_is_exact_at_one(make_learner) -> None:  # noqa: F811
    config = make_learner(fill=0, lr_schedule="cosine", restart_period=10).config
    plain, scaled = LRSchedule(config, "cpu"), LRSchedule(config, "cpu")
    scaled.set_scale(2.5)
    assert float(scaled.lr) == pytest.approx(2.5 * float(plain.lr))  # the next update's rate too
    for _ in range(4):
        plain.advance()
        scaled.advance()
    assert float(scaled.lr) == pytest.approx(2.5 * float(plain.lr), rel=1e-6)
    scaled.set_scale(1.0)
    plain.advance()
    scaled.advance()
    assert torch.equal(scaled.lr, plain.lr)


# -- a real run ----------------------------------------------------------------------------------------------

FORCED = ("train.recovery.enabled=true", "train.recovery.patience=1", "train.recovery.min_delta=1e9",
          "train.recovery.max_recoveries=2", "train.recovery.ring_size=3")


def forced_config(epochs: int):
    return load_config(None, [*TINY, "folds.n_folds=1", f"train.epochs={epochs}", *FORCED,
                              f'data.source="{TINY_DATA}"', 'run.device="cpu"'])


def recovery_records(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return [row["recovery"] for row in rows]


def test_a_forced_recovery_is_recorded_in_the_metrics_and_the_report(tmp_path: Path) -> None:
    path = tmp_path / "run"
    summary = Trainer(forced_config(4), RunDirectory(path), show_progress=False).run()
    assert summary is not None
    records = recovery_records(path)
    assert [r["fired"] for r in records] == [False, True, True, False]
    assert [r.get("number") for r in records] == [None, 1, 2, None]
    assert "max_recoveries" in records[3]["skipped"]
    first = records[1]
    assert first["epoch"] == 1 and first["rewound_to"] in first["ring"] and first["ring"] == [0, 1]
    assert (first["shrink"], first["noise"], first["reset_moments"]) == (0.8, 0.01, ["all"])
    report = build_report(path).read_text(encoding="utf-8")  # what `foxhunt train` and `foxhunt report` write
    assert "Plateau recoveries" in report
    table = report[report.index("<table class='recovery'>"):]
    table = table[: table.index("</table>")]
    assert table.count("<tr><td>0</td>") == 2  # one row per recovery, both in fold 0


def test_off_by_default_the_rows_have_no_recovery_record(reference_run: Path) -> None:
    rows = [json.loads(line) for line in (reference_run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all("recovery" not in row for row in rows)
    assert "Plateau recoveries" not in (reference_run / "report.html").read_text(encoding="utf-8")


def test_resume_after_a_recovery_keeps_its_counters(tmp_path: Path) -> None:
    path = tmp_path / "run"
    config = forced_config(3)
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 2), show_progress=False).run() is None
    saved = read_metadata(path / "checkpoints" / RESUME_NAME)["recovery"]
    assert (saved["used"], saved["fired_at"], saved["boost_left"], saved["stale_epochs"]) == (1, 1, 1, 0)
    summary = Trainer(config, RunDirectory(path, resume=True), show_progress=False).run(resume_from=path)
    assert summary is not None
    records = recovery_records(path)
    assert [r["fired"] for r in records] == [False, True, True]
    assert records[2]["number"] == 2  # counted on from the checkpoint: the second of the fold
    assert records[2]["ring"] == [2]  # the ring is not kept across a resume (documented)
