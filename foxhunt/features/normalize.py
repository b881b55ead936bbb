"""Feature normalisation fitted on a fold's training window only.

Statistics come from the training rows alone and are then applied to any window
(training, validation, live), so nothing about validation bars leaks into the
inputs the agent trains on.
"""

from __future__ import annotations

import attrs
import numpy as np

from foxhunt.errors import DataError
from foxhunt.features.compute import FeatureMatrix

__all__ = ["Normalizer"]

# A feature whose training std is below this (relative to its scale) is constant
# there; dividing by ~0 would blow tiny validation differences up, so it gets std 1.
_FLAT = 1e-12


def _readonly(value: np.ndarray) -> np.ndarray:
    array = np.array(value, dtype=np.float64, copy=True)
    array.flags.writeable = False
    return array


@attrs.frozen(eq=False)
class Normalizer:
    """``(x - mean) / std`` per feature, then clipped to ``[-clip, clip]`` (None: no clipping)."""

    mean: np.ndarray = attrs.field(converter=_readonly)
    std: np.ndarray = attrs.field(converter=_readonly)
    clip: float | None = 10.0

    @classmethod
    def fit(cls, values: np.ndarray | FeatureMatrix, rows: slice | range, clip: float | None = 10.0) -> Normalizer:
        """Fit on ``values[rows]`` only (``rows`` is the fold's training window)."""
        matrix = values.values if isinstance(values, FeatureMatrix) else np.asarray(values)
        if isinstance(rows, range):
            if rows.step != 1:
                raise ValueError(f"Normalizer.fit needs a contiguous window, got {rows}")
            rows = slice(rows.start, rows.stop)
        window = np.asarray(matrix[rows], dtype=np.float64)
        if window.shape[0] < 2:
            raise DataError(f"cannot fit a normaliser on {window.shape[0]} row(s); the training window needs at least 2 bars")
        bad = np.argwhere(~np.isfinite(window))
        if bad.size:
            row = int(bad[0][0]) + (rows.start or 0)
            raise DataError(
                f"normaliser window contains a non-finite value at bar {row} (column {int(bad[0][1])}); "
                "start the training window at or after the feature warm-up"
            )
        mean = window.mean(axis=0)
        std = window.std(axis=0)
        flat = std <= _FLAT * np.maximum(1.0, np.abs(mean))
        return cls(mean=mean, std=np.where(flat, 1.0, std), clip=clip)

    def apply(self, values: np.ndarray | FeatureMatrix) -> np.ndarray:
        """Normalised float32 copy of ``values`` ([bars, features])."""
        matrix = values.values if isinstance(values, FeatureMatrix) else np.asarray(values)
        out = (np.asarray(matrix, dtype=np.float64) - self.mean) / self.std
        if self.clip is not None:
            out = np.clip(out, -self.clip, self.clip)
        return out.astype(np.float32)
