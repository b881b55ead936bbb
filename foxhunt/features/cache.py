"""On-disk cache of feature matrices, keyed by data content and feature-set version.

Files are ``.npz`` read with ``allow_pickle=False`` and written atomically (a
temporary file in the same directory, then ``os.replace``), so a crash or a
concurrent run never leaves a half-written entry under a real key.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import structlog

__all__ = ["CACHE_ENV", "default_cache_dir", "cache_key", "FeatureCache"]

log = structlog.get_logger(__name__)

CACHE_ENV = "FOXHUNT_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$FOXHUNT_CACHE_DIR/features`` when the variable is set, else ``~/.cache/foxhunt/features``."""
    root = os.environ.get(CACHE_ENV)
    return Path(root) / "features" if root else Path.home() / ".cache" / "foxhunt" / "features"


def cache_key(data_hash: str, set_name: str, set_version: str, names: tuple[str, ...], code_version: str) -> str:
    text = "\n".join([data_hash, set_name, set_version, code_version, *names])
    return hashlib.sha256(text.encode()).hexdigest()


class FeatureCache:
    """A directory of cached matrices; counts its hits and misses (for tests and run logs)."""

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def get(self, key: str, names: tuple[str, ...]) -> tuple[np.ndarray, int] | None:
        """Cached (values, warm-up) for ``key``, or None; unreadable entries count as misses."""
        path = self.path(key)
        try:
            with np.load(path, allow_pickle=False) as stored:
                stored_names = tuple(str(n) for n in stored["names"])
                values, warmup = stored["values"], int(stored["warmup"])
        except FileNotFoundError:
            self.misses += 1
            return None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            log.warning("feature_cache_unreadable", path=str(path), error=str(error))
            self.misses += 1
            return None
        if stored_names != names:
            log.warning("feature_cache_names_differ", path=str(path))
            self.misses += 1
            return None
        self.hits += 1
        return values, warmup

    def put(self, key: str, values: np.ndarray, names: tuple[str, ...], warmup: int) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.path(key)
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=f".{key[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                np.savez(stream, values=values, names=np.array(names, dtype=str), warmup=np.int64(warmup))
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, final)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return final
