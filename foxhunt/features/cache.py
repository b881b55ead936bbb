"""On-disk cache of feature matrices, keyed by data content and feature-set version, within a size limit.

Files are ``.npz`` read with ``allow_pickle=False`` and written atomically (a
temporary file in the same directory, then ``os.replace``), so a crash or a
concurrent run never leaves a half-written entry under a real key.

The entries together stay within a size limit (2 GiB unless
``[features] cache_max_mb`` or ``$FOXHUNT_FEATURE_CACHE_MAX_MB`` says
otherwise): after each write the least recently used entries are deleted until
the rest fit. An entry's modification time is its last use: a hit sets it to
now. Access times are not used because most file systems are mounted
``relatime`` or ``noatime`` and do not keep them. An entry larger than the whole
limit is not kept (the features are still returned). Temporary files older than
an hour are left by writers that were killed, and are deleted too.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import structlog

from foxhunt.errors import ConfigError

__all__ = [
    "CACHE_ENV",
    "CACHE_LIMIT_ENV",
    "DEFAULT_CACHE_MAX_MB",
    "default_cache_dir",
    "default_cache_limit",
    "cache_key",
    "FeatureCache",
]

log = structlog.get_logger(__name__)

CACHE_ENV = "FOXHUNT_CACHE_DIR"
CACHE_LIMIT_ENV = "FOXHUNT_FEATURE_CACHE_MAX_MB"
# 2 GiB holds a few dozen matrices of a million bars of the ohlcv set (about 80 MB each as float32) and is
# small beside a disk; one 960 MB entry grew an unlimited cache without bound before there was a limit.
DEFAULT_CACHE_MAX_MB = 2048
MB = 1 << 20
# A write takes seconds; a temporary file this old belongs to a writer that was killed.
STALE_TEMPORARY_SECONDS = 3600


def default_cache_dir() -> Path:
    """``$FOXHUNT_CACHE_DIR/features`` when the variable is set, else ``~/.cache/foxhunt/features``."""
    root = os.environ.get(CACHE_ENV)
    return Path(root) / "features" if root else Path.home() / ".cache" / "foxhunt" / "features"


def default_cache_limit() -> int:
    """Bytes the cache may hold: ``$FOXHUNT_FEATURE_CACHE_MAX_MB`` MiB when set, else 2048 MiB (2 GiB)."""
    text = os.environ.get(CACHE_LIMIT_ENV)
    if text is None or not text.strip():
        return DEFAULT_CACHE_MAX_MB * MB
    try:
        megabytes = int(text.strip().replace("_", ""))
    except ValueError:
        megabytes = 0
    if megabytes <= 0:
        raise ConfigError(
            f"${CACHE_LIMIT_ENV} = {text!r}: the feature cache's size limit must be a whole number of MiB above 0 "
            f"(default {DEFAULT_CACHE_MAX_MB}); set [features] cache = false to turn the cache off"
        )
    return megabytes * MB


def cache_key(
    data_hash: str, set_name: str, set_version: str, names: tuple[str, ...], code_version: str,
    plugin_families: tuple[str, ...] = (),
) -> str:
    """The entry's key. ``plugin_families``: ``<base>=<plugin>@<version>`` of each plugin family used (none for
    the core's families alone, whose keys are unchanged by feature plugins)."""
    text = "\n".join([data_hash, set_name, set_version, code_version, *names, *plugin_families])
    return hashlib.sha256(text.encode()).hexdigest()


class FeatureCache:
    """A directory of cached matrices within ``max_bytes``; counts its hits, misses and evictions.

    ``max_bytes`` None: :func:`default_cache_limit` (the environment variable, else 2 GiB).
    """

    def __init__(self, directory: str | os.PathLike | None = None, max_bytes: int | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.max_bytes = default_cache_limit() if max_bytes is None else int(max_bytes)
        if self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes!r}")
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def get(self, key: str, names: tuple[str, ...]) -> tuple[np.ndarray, int] | None:
        """Cached (values, warm-up) for ``key``, or None; unreadable entries count as misses. A hit is a use."""
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
        _mark_used(path)
        return values, warmup

    def put(self, key: str, values: np.ndarray, names: tuple[str, ...], warmup: int) -> Path | None:
        """Store an entry, then evict down to the limit; the entry's path, or None when it alone is over the limit."""
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
        size = final.stat().st_size
        if size > self.max_bytes:
            # Keeping it would evict every other entry and still break the limit.
            final.unlink(missing_ok=True)
            log.warning("feature_cache_entry_too_large", path=str(final), bytes=size, limit_bytes=self.max_bytes,
                        hint=f"raise [features] cache_max_mb or ${CACHE_LIMIT_ENV} to keep it")
            return None
        _mark_used(final)
        self.evict()
        return final

    def size(self) -> int:
        """Bytes held by the entries now."""
        return sum(size for _, size, _ in self._entries())

    def evict(self) -> None:
        """Delete the least recently used entries until the rest fit in ``max_bytes``, and stale temporary files."""
        entries = sorted(self._entries(), key=lambda entry: entry[0])
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            # Another process may have deleted or replaced it meanwhile: either way it is not ours to count.
            path.unlink(missing_ok=True)
            total -= size
            self.evictions += 1
            log.info("feature_cache_evicted", path=str(path), bytes=size, limit_bytes=self.max_bytes)
        cutoff = time.time() - STALE_TEMPORARY_SECONDS
        for temporary in self.directory.glob(".*.tmp"):
            try:
                if temporary.stat().st_mtime < cutoff:
                    temporary.unlink(missing_ok=True)
            except FileNotFoundError:
                continue

    def _entries(self) -> list[tuple[int, int, Path]]:
        """``(last use in ns, bytes, path)`` of every entry; one removed while listing is skipped."""
        entries = []
        for path in self.directory.glob("*.npz"):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append((stat.st_mtime_ns, stat.st_size, path))
        return entries


def _mark_used(path: Path) -> None:
    # The clock's own nanoseconds, not the file system's coarser timestamp of the write, so two uses in a row
    # are ordered. A cache on a read-only mount cannot record uses; it still serves hits.
    now = time.time_ns()
    try:
        os.utime(path, ns=(now, now))
    except OSError:
        pass
