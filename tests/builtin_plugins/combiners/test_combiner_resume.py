"""A combiner's learned values are run state: a run stopped and resumed with uncertainty weighting ends where an
uninterrupted one does, byte for byte, because the log-variances and their Adam moments travel in the resume
checkpoint."""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import load_file
from trainer_testkit import TINY, TINY_DATA, StopAfter

from foxhunt.config import load_config
from foxhunt.trainer.resume import RESUME_NAME
from foxhunt.trainer.run_dir import RunDirectory
from foxhunt.trainer.trainer import Trainer


def test_a_resumed_run_with_uncertainty_weighting_ends_with_the_uninterrupted_summary(tmp_path: Path) -> None:
    config = load_config(None, [*TINY, f'data.source="{TINY_DATA}"', 'run.device="cpu"',
                                'learner.combiner="uncertainty"'])
    whole = tmp_path / "whole"
    Trainer(config, RunDirectory(whole), show_progress=False).run()

    path = tmp_path / "run"
    assert Trainer(config, RunDirectory(path), stop=StopAfter(path, 1), show_progress=False).run() is None
    [tensors] = (path / "checkpoints" / RESUME_NAME).glob("*.safetensors")
    saved = load_file(tensors)
    log_variances = [name for name in saved if name.endswith("combiner.parameters")]
    assert log_variances and saved[log_variances[0]].abs().sum() > 0  # learned, not the zeros it started at
    assert any(name.endswith("optimizer.combiner.parameters.exp_avg") for name in saved)

    Trainer(config, RunDirectory(path, resume=True), show_progress=False).run(resume_from=path)
    assert (path / "summary.json").read_bytes() == (whole / "summary.json").read_bytes()
