"""``foxhunt export``: a fold checkpoint's greedy policy as a TorchScript or ONNX file (foxhunt.policy_export)."""

from __future__ import annotations

from pathlib import Path

import click

from foxhunt.policy_export import EXPORT_FORMATS, EXPORT_INPUTS, export_policy

__all__ = ["export_command"]


@click.command("export")
@click.argument("checkpoint", type=click.Path(path_type=Path))
@click.option("--format", "export_format", type=click.Choice(list(EXPORT_FORMATS)), required=True,
              help="torchscript (load with torch.jit.load) or onnx (onnxruntime and other ONNX runtimes; needs the "
                   "`export` extra: pip install 'foxhunt[export]').")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="The model file to write (default: the checkpoint folder's name with .pt or .onnx, in the current "
                   "folder). Its metadata JSON goes beside it as OUTPUT.json.")
@click.option("--inputs", type=click.Choice(EXPORT_INPUTS), default="observation", show_default=True,
              help="observation: one float32 [batch, features + 7] normalised observation, as the policy saw it in "
                   "training. raw: float32 raw features [batch, features] and float32 portfolio fields [batch, 7]; "
                   "the checkpoint's feature normaliser is inside the model.")
def export_command(checkpoint: Path, export_format: str, output: Path | None, inputs: str) -> None:
    """Export a fold checkpoint (RUN_DIR/checkpoints/fold_K)'s greedy policy for use outside foxhunt.

    The model maps a batch of observations to actions int64 [batch, 4] (the
    greedy sub-action of each branch: direction, magnitude, order type,
    urgency) and q_values float32 [batch, 4, 4] (expected Q of every
    sub-action; -inf where a branch has fewer sub-actions). The batch size is
    free. The checkpoint is verified as `foxhunt backtest` verifies it. See
    docs/export.md for the input layout and an onnxruntime example.

    \b
    Examples:
      foxhunt export runs/20261130-081500/checkpoints/fold_0 --format onnx --output policy.onnx
      foxhunt export runs/20261130-081500/checkpoints/fold_0 --format torchscript --inputs raw
    """
    model, metadata = export_policy(checkpoint, export_format, output, inputs)
    click.echo(f"wrote {model} ({export_format}, inputs: {inputs}) and its metadata {metadata}")
